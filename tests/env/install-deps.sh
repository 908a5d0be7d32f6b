#!/usr/bin/env bash
# Install what tests/env/testenv.sh needs (used by CI; safe to rerun, fast when warm):
#   1. Debian packages, only if one of their binaries is missing (one `apt-get update`, then
#      `apt-get install -y`), with service auto-start suppressed during the install;
#   2. stop and disable the system services those packages ship (pdns, rabbitmq-server,
#      docker-registry, epmd), so they hold no ports: testenv.sh runs its own instances;
#   3. build (or find cached) kube-apiserver + etcd via build-k8s.sh;
#   4. the Python, JavaScript, Go and C plugin toolchains (componentize-py in a venv, the npm
#      packages of sdk/js, wasm-tools and wit-bindgen from crates.io) via sdk/install-tools.sh;
#   5. the interop tools the suites use (helm, cosign, oras, promtool) via build-tools.sh.
#
#   install-deps.sh [--demo | --without-interop-tools]
#     --demo                    only what `make demo` runs (1 to 3): its host and its two Rust
#                               plugins need no guest toolchain and no interop tool, so a
#                               newcomer's first command does not wait for them
#     --without-interop-tools   1 to 4 (`make test` builds 5 beside its other steps)
set -euo pipefail
GUEST_TOOLS=1 INTEROP_TOOLS=1
case ${1:-} in
  "") ;;
  --demo) GUEST_TOOLS=0 INTEROP_TOOLS=0 ;;
  --without-interop-tools) INTEROP_TOOLS=0 ;;
  *) echo "install-deps.sh: unknown option '$1' (--demo, --without-interop-tools)" >&2; exit 2 ;;
esac

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf '[install-deps] %s\n' "$*" >&2; }

SUDO=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { log "error: not root and no sudo"; exit 1; }
  SUDO=(sudo)
fi

# package -> a file it installs that testenv.sh uses
declare -A PROBE=(
  [pdns-server]=/usr/sbin/pdns_server
  [pdns-backend-sqlite3]=/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql
  # the throughput bench's backend (ORCHARD_TESTENV_PDNS_BACKEND=lmdb)
  [pdns-backend-lmdb]=/usr/lib/x86_64-linux-gnu/pdns/liblmdbbackend.so
  [docker-registry]=/usr/bin/docker-registry
  [openssl]=/usr/bin/openssl
  [curl]=/usr/bin/curl
  [sqlite3]=/usr/bin/sqlite3
  [rabbitmq-server]=/usr/lib/rabbitmq/bin/rabbitmq-server
  [iproute2]=/usr/bin/ss
  [nodejs]=/usr/bin/node
  [npm]=/usr/bin/npm
  [buildah]=/usr/bin/buildah
  [apache2-utils]=/usr/bin/htpasswd
  # the C plugin SDK (sdk/c/build.sh): clang for wasm32-wasi, wasm-ld, builtins, wasi-libc
  [clang-19]=/usr/bin/clang-19
  [lld-19]=/usr/bin/lld-19
  [libclang-rt-19-dev-wasm32]=/usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a
  [wasi-libc]=/usr/lib/wasm32-wasi/libc.a
)
missing=()
for pkg in "${!PROBE[@]}"; do
  [ -e "${PROBE[$pkg]}" ] || missing+=("$pkg")
done

if [ "${#missing[@]}" -gt 0 ]; then
  log "installing: ${missing[*]}"
  # Keep the packages' maintainer scripts from starting their services (invoke-rc.d and
  # deb-systemd-invoke honour policy-rc.d). Only install our policy if there is none.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
    "${SUDO[@]}" chmod 755 "$policy"
    own_policy=1
  fi
  trap 'if [ "$own_policy" = 1 ]; then "${SUDO[@]}" rm -f "$policy"; fi' EXIT
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "packages present"
fi

# Stop and disable the packaged services: they would take ports (53, 5000, 5672, 15672, 4369)
# and are not the instances the tests use.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
  for unit in pdns.service rabbitmq-server.service docker-registry.service epmd.service epmd.socket; do
    if systemctl list-unit-files "$unit" >/dev/null 2>&1; then
      "${SUDO[@]}" systemctl disable --now "$unit" >/dev/null 2>&1 || true
    fi
  done
else
  for svc in pdns rabbitmq-server docker-registry; do
    if [ -x "/etc/init.d/$svc" ]; then
      "${SUDO[@]}" service "$svc" stop >/dev/null 2>&1 || true
      "${SUDO[@]}" update-rc.d "$svc" disable >/dev/null 2>&1 || true
    fi
  done
  # Without systemd there is no epmd unit; a system epmd (default port 4369) may have been
  # started by the rabbitmq service. `epmd -kill` talks only to the one on the default port.
  if command -v epmd >/dev/null && epmd -names >/dev/null 2>&1; then
    "${SUDO[@]}" epmd -kill >/dev/null 2>&1 || true
  fi
fi

if [ "$GUEST_TOOLS" = 1 ]; then
  bash "$SCRIPT_DIR/../../sdk/install-tools.sh"
fi

"$SCRIPT_DIR/build-k8s.sh" >/dev/null
log "ready (kube-apiserver + etcd in $("$SCRIPT_DIR/build-k8s.sh"))"
if [ "$INTEROP_TOOLS" = 1 ]; then
  log "interop tools (helm, cosign, oras, promtool) in $("$SCRIPT_DIR/build-tools.sh")"
fi
