#!/usr/bin/env bash
# Regenerates the Go bindings of wit/ (world shortcut-actuator-plugin: actuator-plugin and the
# optional conversion and orchard:shortcuts exports, which every Go component exports; an
# actuator without orchard.Versioned answers no versions, one without orchard.ShortcutDeclarer
# declares no shortcut) into sdk/go/internal/wit with the pinned wit-bindgen
# (sdk/guest-tools.sh; installed by sdk/install-tools.sh). The bindings are committed;
# sdk/go/build.sh checks that they match the WIT and this wit-bindgen.
#   sdk/go/generate.sh [out-dir]      (default: sdk/go/internal/wit)
set -euo pipefail
SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SDK/../guest-tools.sh"
out=${1:-$SDK/internal/wit}
[ -x "$WIT_BINDGEN" ] || { echo "generate.sh: $WIT_BINDGEN missing: run sdk/install-tools.sh" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# gofmt formats the output when it is on PATH (it is, with go).
(cd "$tmp" && "$WIT_BINDGEN" go --world shortcut-actuator-plugin --generate-stubs --pkg-name orchard.dev/sdk/internal/wit \
  --out-dir gen "$SDK/../../wit" 2>&1 >/dev/null | { grep -v "^Generating " >&2 || true; })
# The stubs of the exported interfaces are replaced by the SDK's dispatch (export_stub.go.in,
# export_conversion_stub.go.in, export_shortcuts_stub.go.in).
for pair in actuator_actuator:export_stub.go.in actuator_conversion:export_conversion_stub.go.in \
  shortcuts_shortcuts:export_shortcuts_stub.go.in; do
  stub=$tmp/gen/exports/export_orchard_${pair%%:*}/wit_bindings.go
  [ -f "$stub" ] || { echo "generate.sh: no stub at $stub" >&2; exit 1; }
  cp "$SDK/${pair#*:}" "$stub"
done
rm -rf "$out"
mkdir -p "$(dirname "$out")"
cp -r "$tmp/gen" "$out"
