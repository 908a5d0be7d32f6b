#!/usr/bin/env bash
# Builds a Python plugin folder into an Orchard actuator component.
#
#   sdk/python/build.sh <plugin-dir> <out.wasm> [extra-python-path ...]
#
# The plugin folder holds `app.py`, whose `Actuator` is what the component exports (see
# docs/writing-a-plugin/python.md). Extra paths are searched for imports too (shared modules).
# The world is orchard:actuator/shortcut-actuator-plugin when app.py binds `Shortcuts` (and
# `Conversion`), orchard:actuator/versioned-actuator-plugin when app.py binds `Conversion` at its
# top level (a kind with several API versions: orchard_sdk.export_conversion), else
# orchard:actuator/actuator-plugin, as before WIT 0.1.2 (orchard_sdk/_world.py reads app.py).
# componentize-py comes from $COMPONENTIZE_PY, else PATH (e.g. an activated venv), else the
# venv $ORCHARD_PYTHON_VENV (default ~/.cache/orchard/python-venv, made by sdk/install-tools.sh).
#
# The pure-Python packages pinned in requirements.txt below componentize-py (`requests` and its
# dependencies, for orchard_sdk.http.session()) are bundled: installed once per set of pins, for
# any platform, into $ORCHARD_PYTHON_GUEST_CACHE (default ~/.cache/orchard/python-guest/<hash>)
# with the pip next to componentize-py (PyPI, or the index pip is configured for), then given
# to componentize-py as the only site-packages — never the build machine's own. A module is in
# the component only when the plugin imports it.
set -euo pipefail

SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SDK/../.." && pwd)

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

py=$(dirname "$cpy")/python
[ -x "$py" ] || py=python3
# -I: the script's folder (orchard_sdk, with its types.py and http.py) is not on sys.path.
WORLD=$("$py" -I "$SDK/orchard_sdk/_world.py" "$plugin/app.py")

# The bundled packages: every `name==version` of requirements.txt but componentize-py.
pins=$(grep -E '^[A-Za-z0-9_.-]+==' "$SDK/requirements.txt" | grep -v '^componentize-py==' || true)
guest_cache=${ORCHARD_PYTHON_GUEST_CACHE:-$HOME/.cache/orchard/python-guest}
site=$guest_cache/$(printf '%s\n' "$pins" | sha256sum | cut -c1-16)
if [ ! -f "$site/.complete" ]; then
  mkdir -p "$guest_cache"
  staging=$(mktemp -d "$guest_cache/.staging.XXXXXX")
  printf '%s\n' "$pins" > "$staging/requirements.txt"
  # Pure-Python wheels only (componentize-py cannot bundle native extensions), for the
  # embedded CPython (3.14 in componentize-py 0.25.1).
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform any --implementation py --python-version 3.14 \
    --target "$staging/lib/site-packages" -r "$staging/requirements.txt" >&2
  touch "$staging/.complete"
  # Another build may have finished first: keep its copy.
  mv -T "$staging" "$site" 2>/dev/null || rm -rf "$staging"
fi

paths=(-p "$plugin" -p "$SDK")
for p in "$@"; do
  paths+=(-p "$(cd "$p" && pwd)")
done
mkdir -p "$(dirname "$out")"
# componentize-py writes its work files next to the output; build in a scratch dir, then move.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# VIRTUAL_ENV is where componentize-py looks for site-packages (else it takes the machine's).
VIRTUAL_ENV=$site "$cpy" -d "$ROOT/wit" -w "$WORLD" componentize "${paths[@]}" app -o "$tmp/out.wasm" >&2
mv "$tmp/out.wasm" "$out"
if [ "$WORLD" = orchard:actuator/actuator-plugin ]; then
  echo "built $out ($(du -h "$out" | cut -f1))" >&2
else
  echo "built $out ($(du -h "$out" | cut -f1), world ${WORLD#orchard:actuator/})" >&2
fi
