#!/usr/bin/env bash
# Build the interop tools the suites use from their published Go modules, cached by version:
#   helm (helm.sh/helm/v3/cmd/helm)
# Prints the directory holding the binaries.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.19.0}"
CACHE="${ORCHARD_TESTENV_CACHE:-$HOME/.cache/orchard-testenv}/tools"
mkdir -p "$CACHE"

build() { # name module@version package
  local name=$1 module=$2 version=$3 package=$4
  local out="$CACHE/$name-$version"
  if [ ! -x "$out" ]; then
    local work
    work=$(mktemp -d)
    (
      cd "$work"
      go mod init orchard.dev/tools-"$name" >/dev/null 2>&1
      GOFLAGS=-mod=mod go get "$module@$version" >&2
      CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$out.tmp" "$package" >&2
    )
    mv "$out.tmp" "$out"
    rm -rf "$work"
  fi
  ln -sf "$out" "$CACHE/$name"
}

build helm helm.sh/helm/v3 "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
echo "$CACHE"
