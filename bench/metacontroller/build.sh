#!/usr/bin/env bash
# Builds metacontroller (github.com/metacontroller/metacontroller) from its source for the
# metacontroller contenders of the throughput bench (issue 25), once per commit:
#
#   bench/metacontroller/build.sh [SOURCE]    # prints the binary's path on its last line
#
# SOURCE is a clone (or bare git dir) of metacontroller, whose HEAD is built, or a tarball
# `metacontroller-<commit12>.tar.gz`; without it, the tarball in bench/metacontroller/source/ —
# `git archive` of that commit's go.mod, go.sum, LICENSE (Apache-2.0), pkg/ and production CRDs,
# kept here because a CI machine cannot get the source otherwise: the Go module proxy does not
# serve it (its go.mod names the module `metacontroller`) and no git host is reachable. Its Go
# dependencies come from the Go module proxy. The binary and the CRDs of that commit
# (manifests/production/metacontroller-crds-v1.yaml) are cached in ~/.cache/orchard-bench/ as
# metacontroller-<commit12> and metacontroller-<commit12>-crds.yaml.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SOURCE=${1:-$(ls "$HERE"/source/metacontroller-*.tar.gz | head -n 1)}
CACHE=${ORCHARD_BENCH_CACHE:-$HOME/.cache/orchard-bench}
if [ -d "$SOURCE" ]; then
  commit=$(git --git-dir="$SOURCE" rev-parse HEAD 2>/dev/null || git -C "$SOURCE" rev-parse HEAD)
  commit=${commit:0:12}
else
  commit=$(basename "$SOURCE" .tar.gz)
  commit=${commit#metacontroller-}
fi
bin=$CACHE/metacontroller-$commit
mkdir -p "$CACHE"
if [ ! -x "$bin" ] || [ ! -f "$bin-crds.yaml" ]; then
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  if [ -d "$SOURCE" ]; then
    { git --git-dir="$SOURCE" archive HEAD 2>/dev/null || git -C "$SOURCE" archive HEAD; } | tar -x -C "$src"
  else
    tar -xzf "$SOURCE" -C "$src" --strip-components=1
  fi
  echo "bench: building metacontroller $commit (go build ./pkg/cmd/metacontroller)" >&2
  start=$SECONDS
  (cd "$src" && GOTOOLCHAIN=local go build -o "$bin.tmp" ./pkg/cmd/metacontroller)
  cp "$src/manifests/production/metacontroller-crds-v1.yaml" "$bin-crds.yaml"
  mv "$bin.tmp" "$bin"
  echo "bench: metacontroller built in $((SECONDS - start)) s" >&2
fi
echo "$bin"
