#!/usr/bin/env bash
# Installs the build tools of the Python, JavaScript, Go and C plugin SDKs. Idempotent, and quick when
# nothing changed (a version check and a lockfile comparison):
#   1. componentize-py and the packages plugins bundle (requests …), pinned in
#      sdk/python/requirements.txt, into the venv
#      $ORCHARD_PYTHON_VENV (default ~/.cache/orchard/python-venv);
#   2. sdk/js/node_modules from sdk/js/package-lock.json (`npm ci`), redone only when the
#      lockfile changed since the last install;
#   3. sdk/js/types: TypeScript declarations of the WIT world for editors (`jco types`);
#   4. for the Go and C SDKs: wasm-tools and wit-bindgen-cli, pinned, from crates.io
#      (`cargo install --root $ORCHARD_GUEST_TOOLS`, default ~/.cache/orchard/guest-tools), and
#      the wasi preview-1 reactor adapter from the crate wasi-preview1-component-adapter-provider.
set -euo pipefail

SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf '[install-tools] %s\n' "$*" >&2; }

# 1. componentize-py and the pure-Python packages plugins bundle (requests …), pinned in
#    requirements.txt, into one venv: the Python SDK's unit tests run with its python too, so
#    they test the pinned versions, not whatever the system python has. Reinstalled when the
#    requirements file changes.
venv=${ORCHARD_PYTHON_VENV:-$HOME/.cache/orchard/python-venv}
want=$(sed -n 's/^componentize-py==//p' "$SDK/python/requirements.txt")
stamp=$venv/.orchard-requirements.sha256
req_sum=$(sha256sum "$SDK/python/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$req_sum" ]; then
  log "componentize-py $want and the bundled packages into $venv"
  command -v python3 >/dev/null || { log "error: python3 is required"; exit 1; }
  if [ ! -x "$venv/bin/pip" ]; then
    python3 -m venv "$venv" || {
      log "error: python3 -m venv failed (Debian: apt-get install python3-venv)"
      exit 1
    }
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$SDK/python/requirements.txt"
  echo "$req_sum" >"$stamp"
else
  log "componentize-py $want and the bundled packages present"
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

# 4. Go and C SDK tools (sdk/go/build.sh and sdk/c/build.sh find them through sdk/guest-tools.sh)
. "$SDK/guest-tools.sh"
cargo_install() { # crate version features
  local crate=$1 version=$2 features=$3 bin=$4
  if [ "$("$GUEST_TOOLS/bin/$bin" --version 2>/dev/null | awk '{print $2}')" = "$version" ]; then
    log "$crate $version present"
    return
  fi
  command -v cargo >/dev/null || { log "error: cargo is required (rustup)"; exit 1; }
  log "cargo install $crate $version into $GUEST_TOOLS (a few minutes, once)"
  cargo install --quiet --locked --root "$GUEST_TOOLS" --version "=$version" \
    --no-default-features --features "$features" "$crate" >&2
}
cargo_install wasm-tools "$WASM_TOOLS_VERSION" component,validate,print,parse,metadata,strip,objdump,dump wasm-tools
cargo_install wit-bindgen-cli "$WIT_BINDGEN_VERSION" c,go wit-bindgen
if [ ! -s "$WASI_ADAPTER" ]; then
  log "wasi-preview1-component-adapter-provider $ADAPTER_VERSION -> $WASI_ADAPTER"
  fetch=$GUEST_TOOLS/adapter-fetch
  mkdir -p "$fetch/src"
  cat >"$fetch/Cargo.toml" <<TOML
[package]
name = "orchard-adapter-fetch"
version = "0.0.0"
edition = "2021"
publish = false
[lib]
path = "lib.rs"
[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER_VERSION"
[workspace]
TOML
  : >"$fetch/lib.rs"
  # `cargo metadata` downloads and unpacks the crate; its manifest path locates the artefact.
  manifest=$(cd "$fetch" && cargo metadata --format-version 1 --quiet | python3 -c '
import json, sys
m = json.load(sys.stdin)
print(next(p["manifest_path"] for p in m["packages"] if p["name"] == "wasi-preview1-component-adapter-provider"))')
  src=$(dirname "$manifest")/artefacts/wasi_snapshot_preview1.reactor.wasm
  [ -s "$src" ] || { log "error: $src not found"; exit 1; }
  cp "$src" "$WASI_ADAPTER.tmp" && mv "$WASI_ADAPTER.tmp" "$WASI_ADAPTER"
fi
