#!/usr/bin/env bash
# Build kube-apiserver and etcd from Go modules at a pinned Kubernetes release, cached by version.
#
# k8s.io/kubernetes requires its staging modules at v0.0.0 with `replace => ./staging/...`; those
# replace lines are ignored when it is a dependency, so this script writes a go.mod of its own that
# pins every staging module to the published v0.Y.Z matching v1.Y.Z. etcd comes from the same
# module graph (go.etcd.io/etcd/server/v3 is a main package), i.e. the etcd that release was
# tested with.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.34.4}"
CACHE="${ORCHARD_TESTENV_CACHE:-$HOME/.cache/orchard-testenv}/$K8S_VERSION"
if [ -x "$CACHE/kube-apiserver" ] && [ -x "$CACHE/etcd" ]; then
  echo "$CACHE"
  exit 0
fi

mkdir -p "$CACHE"
# Serialise concurrent runs (e.g. install-deps.sh and testenv.sh up): they would wipe each other's
# work dir. Whoever waited finds the binaries the other one built.
exec 9>"$CACHE.lock"
flock 9
if [ -x "$CACHE/kube-apiserver" ] && [ -x "$CACHE/etcd" ]; then
  echo "$CACHE"
  exit 0
fi
work="$CACHE/src"
rm -rf "$work" && mkdir -p "$work"
cd "$work"
minor="${K8S_VERSION#v1.}"   # 34.4
staging_version="v0.${minor}"

export GOFLAGS=-mod=mod CGO_ENABLED=0
go mod init orchard.dev/testenv-k8s >/dev/null 2>&1
# Fetch kubernetes' own go.mod to learn its list of staging modules.
modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
{
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo "replace ("
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$modfile" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} >>go.mod
cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
GO
go mod tidy >&2
go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION" -o "$CACHE/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2
go build -trimpath -ldflags "-s -w" -o "$CACHE/etcd.tmp" go.etcd.io/etcd/server/v3 >&2
mv "$CACHE/kube-apiserver.tmp" "$CACHE/kube-apiserver"
mv "$CACHE/etcd.tmp" "$CACHE/etcd"
echo "$CACHE"
