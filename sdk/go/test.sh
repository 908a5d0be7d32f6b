#!/usr/bin/env bash
# Runs a Go plugin folder's own tests natively (go test), in the workspace sdk/go/build.sh
# builds it in (the plugin, this SDK, the vendored wit runtime), with nothing downloaded:
#   sdk/go/test.sh <plugin-dir> [go test flags and packages, default ./...]
set -euo pipefail
SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "sdk/go/test.sh: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: sdk/go/test.sh <plugin-dir> [go test arguments]"
plugin=$(cd "$1" && pwd) || die "no folder $1"
shift
[ -f "$plugin/go.mod" ] || die "$plugin has no go.mod (see docs/writing-a-plugin/go.md)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$SDK/gowork.sh"
write_gowork "$work/go.work" "$plugin"
export GOCACHE=${GOCACHE:-$HOME/.cache/orchard/go-build} GOWORK=$work/go.work GOPROXY=off GOTOOLCHAIN=local
check_modules "$plugin"
[ $# -gt 0 ] || set -- ./...
cd "$plugin" && go test "$@"
