#!/usr/bin/env bash
# Builds a Go plugin folder into an Orchard component, with mainline Go (wasip1, c-shared):
#   sdk/go/build.sh <plugin-dir> <out.wasm>
# The plugin folder is a Go module whose main package calls orchard.Export in an init
# function. It may require orchard.dev/sdk at any version: the build resolves it (and the
# vendored wit runtime) to this checkout through a go.work of its own, so the plugin's go.mod
# needs no replace directives. Nothing is downloaded (GOPROXY=off): the SDK's own
# dependencies (sdk/go/go.sum) come from the module cache, filled by sdk/go/download.sh.
#
# Tools: go >= 1.26 on PATH (the go line of the SDK's go.mod and of the go.work below; with
# GOTOOLCHAIN=local an older go stops with "requires go >= 1.26"), wasm-tools and the reactor
# adapter from sdk/install-tools.sh; cargo, for tools/preinit (built from this checkout).
# GOCACHE defaults to ~/.cache/orchard/go-build so that rebuilds are quick.
set -euo pipefail
SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SDK/../guest-tools.sh"
die() { echo "sdk/go/build.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: sdk/go/build.sh <plugin-dir> <out.wasm>"
plugin=$(cd "$1" && pwd) || die "no folder $1"
out=$2
[ -f "$plugin/go.mod" ] || die "$plugin has no go.mod (see docs/writing-a-plugin/go.md)"
command -v go >/dev/null || die "go is required (mainline Go 1.26 or later)"
[ -x "$WASM_TOOLS" ] && [ -s "$WASI_ADAPTER" ] || die "wasm-tools or the wasi adapter is missing: run sdk/install-tools.sh"

# The committed bindings must be those of this WIT and this wit-bindgen.
if [ -x "$WIT_BINDGEN" ]; then
  fresh=$(mktemp -d)
  "$SDK/generate.sh" "$fresh/wit"
  if ! diff -r -q "$fresh/wit" "$SDK/internal/wit" >/dev/null; then
    rm -rf "$fresh"
    die "sdk/go/internal/wit does not match wit/ and wit-bindgen $WIT_BINDGEN_VERSION: run sdk/go/generate.sh"
  fi
  rm -rf "$fresh"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$SDK/gowork.sh"
write_gowork "$work/go.work" "$plugin"
export GOCACHE=${GOCACHE:-$HOME/.cache/orchard/go-build} GOWORK=$work/go.work GOPROXY=off GOTOOLCHAIN=local
check_modules "$plugin"
# Describe and Versions are pure: the plugin, built natively, writes their answers as a Go file
# of the SDK (orchard.BuiltDescriptionEnv), which the component's build adds (an overlay). The
# component then answers them from constants and does not link package schema's JSON-Schema
# library, whose package initialisers every fresh instance would run (docs/benchmarks.md).
(cd "$plugin" && CGO_ENABLED=0 go build -trimpath -o "$work/describe" .)
ORCHARD_SDK_BUILT_DESCRIPTION="$work/built_description_wasip1.go" "$work/describe" \
  || die "the plugin's Describe or Versions failed when run natively (see above)"
[ -s "$work/built_description_wasip1.go" ] || die "the plugin wrote no description: does its init call orchard.Export?"
# The second overlay entry adds a file to package runtime: runtime.orchardReseed, which each
# instance of the pre-initialised module calls (preinit_wasi.go).
printf '{"Replace":{"%s":"%s","%s":"%s"}}\n' \
  "$SDK/built_description_wasip1.go" "$work/built_description_wasip1.go" \
  "$(go env GOROOT)/src/runtime/orchard_reseed.go" "$SDK/runtime_reseed.go.in" >"$work/overlay.json"
# -checklinkname=0: the wit runtime links to runtime.sbrk, the SDK to runtime.orchardReseed.
(cd "$plugin" && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -overlay="$work/overlay.json" \
  -ldflags="-s -w -checklinkname=0" -o "$work/core.wasm" .)
# Pre-initialised (tools/preinit): the Go runtime's start-up and every package's init functions
# run once, here, and each instance starts from the memory they left — ≈ 0.5 ms less a call
# (docs/benchmarks.md). Each instance runs only the SDK's resume (preinit_wasi.go), exported as
# _initialize. The tool is built as `make test` builds the workspace (`cargo test` resolves the
# features: one build of wasmtime for it and the host).
preinit=${ORCHARD_PREINIT:-}
if [ -z "$preinit" ]; then
  root=$(cd "$SDK/../.." && pwd)
  (cd "$root" && cargo test --workspace --no-run --quiet --test preinit) || die "tools/preinit did not build (above)"
  preinit=$(cd "$root" && realpath -m "${CARGO_TARGET_DIR:-target}")/debug/orchard-preinit
fi
"$preinit" "$work/core.wasm" -o "$work/core.pre.wasm" --resume orchard-resume
# The world shortcut-actuator-plugin: every Go component exports conversion (WIT 0.1.2) and
# orchard:shortcuts (0.1.0).
"$WASM_TOOLS" component embed --world shortcut-actuator-plugin "$SDK/../../wit" "$work/core.pre.wasm" -o "$work/embed.wasm"
mkdir -p "$(dirname "$out")"
"$WASM_TOOLS" component new "$work/embed.wasm" --adapt "wasi_snapshot_preview1=$WASI_ADAPTER" -o "$out.tmp"
"$WASM_TOOLS" validate "$out.tmp"
mv "$out.tmp" "$out"
echo "sdk/go/build.sh: $out ($(wc -c <"$out") bytes)" >&2
