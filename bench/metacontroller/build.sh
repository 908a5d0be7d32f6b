#!/usr/bin/env bash
# Builds metacontroller (github.com/metacontroller/metacontroller) from its source for the
# metacontroller contenders of the throughput bench (issue 25), once per commit:
#
#   bench/metacontroller/build.sh GIT_DIR     # prints the binary's path on its last line
#
# GIT_DIR is a clone (or bare git dir) of metacontroller; its HEAD is built. Its Go modules come
# from the Go module proxy. The binary and the CRDs of that commit
# (manifests/production/metacontroller-crds-v1.yaml) are cached in ~/.cache/orchard-bench/ as
# metacontroller-<commit12> and metacontroller-<commit12>-crds.yaml. Nothing of metacontroller is
# kept in this tree.
set -euo pipefail
GIT_DIR=${1:?usage: build.sh GIT_DIR}
CACHE=${ORCHARD_BENCH_CACHE:-$HOME/.cache/orchard-bench}
commit=$(git --git-dir="$GIT_DIR" rev-parse HEAD)
bin=$CACHE/metacontroller-${commit:0:12}
mkdir -p "$CACHE"
if [ ! -x "$bin" ] || [ ! -f "$bin-crds.yaml" ]; then
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  git --git-dir="$GIT_DIR" archive HEAD | tar -x -C "$src"
  echo "bench: building metacontroller ${commit:0:12} (go build ./pkg/cmd/metacontroller)" >&2
  start=$SECONDS
  (cd "$src" && go build -o "$bin.tmp" ./pkg/cmd/metacontroller)
  cp "$src/manifests/production/metacontroller-crds-v1.yaml" "$bin-crds.yaml"
  mv "$bin.tmp" "$bin"
  echo "bench: metacontroller built in $((SECONDS - start)) s" >&2
fi
echo "$bin"
