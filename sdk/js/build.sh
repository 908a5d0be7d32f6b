#!/usr/bin/env bash
# Builds a JavaScript plugin folder into an Orchard actuator component.
#
#   sdk/js/build.sh <plugin-dir> <out.wasm>
#
# The plugin folder holds `app.js`, which exports `actuator` (see
# docs/writing-a-plugin/javascript.md). Needs `npm ci` in sdk/js (sdk/install-tools.sh does it).
set -euo pipefail
SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ ! -d "$SDK/node_modules/@bytecodealliance/componentize-js" ]; then
  echo "error: $SDK/node_modules is missing: run sdk/install-tools.sh (or npm ci in $SDK)" >&2
  exit 1
fi
exec node "$SDK/build.mjs" "$@"
