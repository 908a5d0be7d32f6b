#!/usr/bin/env bash
# The README path on a fresh machine, as closely as one machine can: a fresh clone of a commit
# and a fresh HOME (no cargo registry, no Go module or build cache, no pip, npm or guest-tool
# caches, no test-environment binaries); rustup's toolchains and the Debian packages stay.
# Runs `.ci/run` there (make demo, its checks, make test, make demo twice, make test, demo-down)
# and prints each command's wall time. Needs ≈ 20 GB of disk (the target dir is most of it).
#
#   tests/cold-run.sh [COMMIT] [DIR]      default: HEAD of this clone, /tmp/orchard-cold
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
COMMIT=${1:-HEAD}
COLD=${2:-/tmp/orchard-cold}
rm -rf "$COLD" && mkdir -p "$COLD"
git clone -q "$REPO" "$COLD/orchard" && git -C "$COLD/orchard" checkout -q "$(git -C "$REPO" rev-parse "$COMMIT")"
cd "$COLD/orchard" || exit 1
echo "cold-run: commit $(git rev-parse --short HEAD), HOME=$COLD, start $(date -u +%FT%TZ)"
env -i HOME="$COLD" TERM=dumb CI=true LANG=C.UTF-8 \
  PATH="/usr/local/go/bin:$COLD/go/bin:$COLD/.cargo/bin:$HOME/.cargo/bin:${PYENV_ROOT:-$HOME/.pyenv}/shims:${PYENV_ROOT:-$HOME/.pyenv}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" CARGO_HOME="$COLD/.cargo" PYENV_ROOT="${PYENV_ROOT:-$HOME/.pyenv}" \
  RUSTUP_AUTO_INSTALL=0 bash -c 'time bash .ci/run'
rc=$?
echo "cold-run: rc=$rc, end $(date -u +%FT%TZ); remove $COLD when done (it is ≈ 18 GB)"
exit "$rc"
