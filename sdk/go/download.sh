#!/usr/bin/env bash
# Fills the Go module cache with the modules the Go SDK (sdk/go/go.sum) and the given Go
# plugins need, from the Go module proxy (GOPROXY as the machine has it), so that
# sdk/go/build.sh, sdk/go/test.sh and `go test` in sdk/go, which download nothing
# (GOPROXY=off), find them:
#   sdk/go/download.sh [plugin-dir...]
# `make guest-plugins` (so `make plugins`, `make demo` and `make test`, CI's path) runs it before
# the Go builds. Without network once the modules are cached (go mod download looks there
# first).
set -euo pipefail
SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SDK/gowork.sh"
export GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=mod"
(cd "$SDK" && GOWORK=off go mod download)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for dir in "$@"; do
  plugin=$(cd "$dir" && pwd)
  write_gowork "$work/go.work" "$plugin"
  (cd "$plugin" && GOWORK=$work/go.work go mod download)
done
