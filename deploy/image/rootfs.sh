#!/usr/bin/env bash
# Assemble the root filesystem of the Orchard image: the `orchard` binary, the few shared
# libraries it links (from ldd), the plugins, a passwd entry for the non-root user 65532 and
# CA certificates. The Dockerfile copies it onto `scratch`, so no base image is pulled.
#   deploy/image/rootfs.sh <orchard-binary> <plugins-dir> <out-dir>
set -euo pipefail
bin=$1 plugins=$2 out=$3
rm -rf "$out"
mkdir -p "$out"/{usr/local/bin,usr/share/orchard/plugins,etc/ssl/certs,tmp,var/cache/orchard}
cp "$bin" "$out/usr/local/bin/orchard"
# Every library the binary needs, at the path the loader looks for it.
ldd "$bin" | awk '/=> \//{print $3} /^[ \t]*\/.*ld-linux/{print $1}' | sort -u | while read -r lib; do
  mkdir -p "$out$(dirname "$lib")"
  cp -L "$lib" "$out$lib"
done
cp "$plugins"/*.wasm "$out/usr/share/orchard/plugins/" 2>/dev/null || true
[ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/"
echo 'nonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin' >"$out/etc/passwd"
echo 'nonroot:x:65532:' >"$out/etc/group"
chmod 1777 "$out/tmp"
chown -R 65532:65532 "$out/var/cache/orchard" 2>/dev/null || true
