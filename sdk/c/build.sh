#!/usr/bin/env bash
# Builds a C plugin folder (every *.c in it) into an Orchard component:
#   sdk/c/build.sh <plugin-dir> <out.wasm>
# The C bindings of wit/ (world shortcut-actuator-plugin: the actuator and the optional
# conversion export, which answers "one version" unless the plugin lists versions, and the
# orchard:shortcuts export, which declares none unless the plugin sets them) are generated
# at build time by the pinned wit-bindgen into a cache folder keyed by the WIT's digest; the SDK
# (sdk/c/*.c) is compiled with the plugin.
#
# Tools: Debian's clang-19, lld-19, libclang-rt-19-dev-wasm32 and wasi-libc (preview 1; the
# reactor adapter turns the module into a wasi preview 2 component), wasm-tools, wit-bindgen
# and the adapter from sdk/install-tools.sh. CC and CFLAGS override the compiler and flags.
set -euo pipefail
SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SDK/../guest-tools.sh"
die() { echo "sdk/c/build.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: sdk/c/build.sh <plugin-dir> <out.wasm>"
plugin=$(cd "$1" && pwd) || die "no folder $1"
out=$2
CC=${CC:-clang-19}
CFLAGS=${CFLAGS:--Os -Wall -Wextra -Werror=implicit-function-declaration}
command -v "$CC" >/dev/null || die "$CC is required (Debian: apt-get install clang-19 lld-19 libclang-rt-19-dev-wasm32 wasi-libc)"
[ -x "$WIT_BINDGEN" ] && [ -x "$WASM_TOOLS" ] && [ -s "$WASI_ADAPTER" ] || die "wit-bindgen, wasm-tools or the wasi adapter is missing: run sdk/install-tools.sh"
shopt -s nullglob
sources=("$plugin"/*.c)
[ ${#sources[@]} -gt 0 ] || die "no .c files in $plugin"

wit=$SDK/../../wit
world=shortcut-actuator-plugin
bindings=${world//-/_} # shortcut_actuator_plugin.c, .h, _component_type.o
digest=$( (echo "$WIT_BINDGEN_VERSION $world"; find "$wit" -name '*.wit' | sort | xargs cat) | sha256sum | cut -c1-16)
gen=$GUEST_TOOLS/c-bindings/$digest
if [ ! -f "$gen/$bindings.c" ]; then
  rm -rf "$gen.tmp.$$" && mkdir -p "$gen.tmp.$$"
  "$WIT_BINDGEN" c --world "$world" --out-dir "$gen.tmp.$$" "$wit" >/dev/null
  rm -rf "$gen" && mv "$gen.tmp.$$" "$gen"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
objs=()
for src in "$gen/$bindings.c" "$SDK"/*.c "${sources[@]}"; do
  obj=$work/$(basename "$(dirname "$src")")-$(basename "$src" .c).o
  # The generated code is not ours to warn about.
  flags=$CFLAGS
  [ "$src" = "$gen/$bindings.c" ] && flags="-Os -w"
  # shellcheck disable=SC2086
  "$CC" --target=wasm32-wasi $flags -I"$SDK" -I"$gen" -c "$src" -o "$obj"
  objs+=("$obj")
done
# -mexec-model=reactor: no main; the host calls the exports.
"$CC" --target=wasm32-wasi -mexec-model=reactor -Wl,--strip-all -o "$work/core.wasm" "${objs[@]}" "$gen/${bindings}_component_type.o"
mkdir -p "$(dirname "$out")"
"$WASM_TOOLS" component new "$work/core.wasm" --adapt "wasi_snapshot_preview1=$WASI_ADAPTER" -o "$out.tmp"
"$WASM_TOOLS" validate "$out.tmp"
mv "$out.tmp" "$out"
echo "sdk/c/build.sh: $out ($(wc -c <"$out") bytes)" >&2
