#!/usr/bin/env bash
# Installs the build tools of the Python and JavaScript plugin SDKs. Idempotent, and quick when
# nothing changed (a version check and a lockfile comparison):
#   1. componentize-py, pinned in sdk/python/requirements.txt, into the venv
#      $ORCHARD_PYTHON_VENV (default ~/.cache/orchard/python-venv);
#   2. sdk/js/node_modules from sdk/js/package-lock.json (`npm ci`), redone only when the
#      lockfile changed since the last install;
#   3. sdk/js/types: TypeScript declarations of the WIT world for editors (`jco types`).
set -euo pipefail

SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf '[install-tools] %s\n' "$*" >&2; }

# 1. componentize-py
venv=${ORCHARD_PYTHON_VENV:-$HOME/.cache/orchard/python-venv}
want=$(sed -n 's/^componentize-py==//p' "$SDK/python/requirements.txt")
have=$("$venv/bin/componentize-py" --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  log "componentize-py $want into $venv"
  command -v python3 >/dev/null || { log "error: python3 is required"; exit 1; }
  if [ ! -x "$venv/bin/pip" ]; then
    python3 -m venv "$venv" || {
      log "error: python3 -m venv failed (Debian: apt-get install python3-venv)"
      exit 1
    }
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$SDK/python/requirements.txt"
else
  log "componentize-py $want present"
fi

# 2. npm packages
js=$SDK/js
command -v npm >/dev/null || { log "error: node and npm are required (Debian: apt-get install nodejs npm)"; exit 1; }
stamp=$js/node_modules/.orchard-lock.sha256
lock_sum=$(sha256sum "$js/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sum" ]; then
  log "npm ci in $js"
  (cd "$js" && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$lock_sum" >"$stamp"
else
  log "sdk/js/node_modules up to date"
fi

# 3. editor types, regenerated when the WIT is newer than them
if [ ! -f "$js/types/actuator-plugin.d.ts" ] ||
  [ -n "$(find "$SDK/../wit" -newer "$js/types/actuator-plugin.d.ts" -name '*.wit' -print -quit)" ]; then
  log "jco types -> sdk/js/types"
  (cd "$js" && npm run --silent types -- --quiet >&2)
fi
