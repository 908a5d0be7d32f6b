#!/usr/bin/env bash
# Build the test environment's OpenTelemetry Collector from the module in tests/env/otelcol
# (otlpreceiver + fileexporter, every collector module pinned in its go.mod and go.sum), cached by
# version. Prints the path of the binary.
#
# The cache name carries the collector release and a hash of the module's three files, so an edit
# of the module (another component, another pin) builds anew instead of reusing a stale binary.
# Go's module and build caches are left where they are: a rebuild after such an edit, or on a
# cleared tools dir, costs seconds.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/otelcol" && pwd)
CACHE="${ORCHARD_TESTENV_CACHE:-$HOME/.cache/orchard-testenv}/tools"
VERSION=$(awk '$1 == "go.opentelemetry.io/collector/otelcol" { print $2 }' "$SRC/go.mod")
[ -n "$VERSION" ] || { echo "build-otelcol: no go.opentelemetry.io/collector/otelcol in $SRC/go.mod" >&2; exit 1; }
HASH=$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-12)
OUT="$CACHE/otelcol-$VERSION-$HASH"
if [ -x "$OUT" ]; then
  echo "$OUT"
  exit 0
fi

mkdir -p "$CACHE"
# Serialise concurrent runs (the demo's and the tests' `up` at once): whoever waited finds the
# binary the other one built.
exec 9>"$OUT.lock"
flock 9
if [ ! -x "$OUT" ]; then
  # -mod=readonly: build exactly the pinned graph; a go.sum that lacks an entry fails here rather
  # than being "fixed" on the fly. GOWORK=off: the module is built alone, whatever go.work is
  # around. -buildvcs=false: the binary must not depend on the state of the work tree.
  (
    cd "$SRC"
    GOWORK=off CGO_ENABLED=0 go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w" \
      -o "$OUT.tmp" . >&2
  )
  mv "$OUT.tmp" "$OUT"
fi
rm -f "$OUT.lock"
echo "$OUT"
