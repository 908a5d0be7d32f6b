#!/usr/bin/env bash
# Build the interop tools the suites use from their published Go modules, cached by version:
#   helm   (helm.sh/helm/v3/cmd/helm)                 the chart tests
#   cosign (github.com/sigstore/cosign/v2/cmd/cosign) signs plugin artifacts in the OCI tests
#   oras   (oras.land/oras/cmd/oras)                  pushes/pulls them from the other side
#   promtool (github.com/prometheus/prometheus/cmd/promtool) checks and unit-tests the chart's alerts
# Prints the directory holding the binaries.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.19.0}"
# cosign 2.x: signatures as `sha256-<digest>.sig` tags, the layout sigstore-rs verifies.
COSIGN_VERSION="${COSIGN_VERSION:-v2.6.5}"
ORAS_VERSION="${ORAS_VERSION:-v1.3.6}"
# The Go module version of Prometheus 3.16.0 (its module is tagged v0.316.0).
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
CACHE="${ORCHARD_TESTENV_CACHE:-$HOME/.cache/orchard-testenv}/tools"
mkdir -p "$CACHE"
# One build at a time (`make test` runs this in the background; a second run waits).
exec 9>"$CACHE/.lock"
flock 9

build() { # name module version package [build tags]
  local name=$1 module=$2 version=$3 package=$4 tags=${5:-}
  local out="$CACHE/$name-$version${tags:+-$tags}"
  if [ ! -x "$out" ]; then
    local work
    work=$(mktemp -d)
    (
      cd "$work"
      go mod init orchard.dev/tools-"$name" >/dev/null 2>&1
      GOFLAGS=-mod=mod go get "$module@$version" >&2
      CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags "$tags" -ldflags "-s -w" -o "$out.tmp" "$package" >&2
    )
    mv "$out.tmp" "$out"
    rm -rf "$work"
  fi
  ln -sf "$out" "$CACHE/$name"
}

build helm helm.sh/helm/v3 "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
build cosign github.com/sigstore/cosign/v2 "$COSIGN_VERSION" github.com/sigstore/cosign/v2/cmd/cosign
build oras oras.land/oras "$ORAS_VERSION" oras.land/oras/cmd/oras
# Without the service discoveries (remove_all_sd, Prometheus's own build tag): rules need none,
# and they are most of its dependencies (the build with them took 14 min cold here).
build promtool github.com/prometheus/prometheus "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/promtool remove_all_sd
echo "$CACHE"
