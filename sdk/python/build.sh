#!/usr/bin/env bash
# Builds a Python plugin folder into an Orchard actuator component.
#
#   sdk/python/build.sh <plugin-dir> <out.wasm> [extra-python-path ...]
#
# The plugin folder holds `app.py`, whose `Actuator` is what the component exports (see
# docs/writing-a-plugin/python.md). Extra paths are searched for imports too (shared modules).
# componentize-py comes from $COMPONENTIZE_PY, else PATH (e.g. an activated venv), else the
# venv $ORCHARD_PYTHON_VENV (default ~/.cache/orchard/python-venv, made by sdk/install-tools.sh).
set -euo pipefail

SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SDK/../.." && pwd)
WORLD=orchard:actuator/actuator-plugin

if [ $# -lt 2 ]; then
  echo "usage: $0 <plugin-dir> <out.wasm> [extra-python-path ...]" >&2
  exit 2
fi
plugin=$(cd "$1" && pwd)
out=$2
shift 2
[ -f "$plugin/app.py" ] || { echo "error: $plugin/app.py does not exist" >&2; exit 1; }

venv=${ORCHARD_PYTHON_VENV:-$HOME/.cache/orchard/python-venv}
cpy=${COMPONENTIZE_PY:-}
if [ -z "$cpy" ]; then
  if command -v componentize-py >/dev/null; then
    cpy=$(command -v componentize-py)
  elif [ -x "$venv/bin/componentize-py" ]; then
    cpy=$venv/bin/componentize-py
  else
    echo "error: componentize-py not found: run sdk/install-tools.sh (or pip install -r $SDK/requirements.txt)" >&2
    exit 1
  fi
fi
want=$(sed -n 's/^componentize-py==//p' "$SDK/requirements.txt")
have=$("$cpy" --version | awk '{print $2}')
if [ "$have" != "$want" ]; then
  echo "error: $cpy is version $have, the SDK is pinned to $want (sdk/python/requirements.txt)" >&2
  exit 1
fi

paths=(-p "$plugin" -p "$SDK")
for p in "$@"; do
  paths+=(-p "$(cd "$p" && pwd)")
done
mkdir -p "$(dirname "$out")"
# componentize-py writes its work files next to the output; build in a scratch dir, then move.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cpy" -d "$ROOT/wit" -w "$WORLD" componentize "${paths[@]}" app -o "$tmp/out.wasm" >&2
mv "$tmp/out.wasm" "$out"
echo "built $out ($(du -h "$out" | cut -f1))" >&2
