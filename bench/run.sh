#!/usr/bin/env bash
# The throughput bench (issue 13, docs/benchmarks.md "Throughput"): N objects created at once by
# 8 parallel clients, timed to all Available and to all deleted, for each contender in turn.
#
#   bench/run.sh [--objects N] [--contenders a,b,c] [options] [-- harness options]
#
# Contenders: orchard-component (pdns-zone component), orchard-warning (the same with
# `--events warning`), orchard-native (the same actuator linked into the host, feature
# bench-native), kopf (bench/kopf/operator.py at kopf's defaults: no Events of its own),
# kopf-events (the same with its handlers' logs posted as Events), orchard-python (the
# rabbitmq-vhost Python guest), floor (orchard-floor, bench/throughput/src/bin/floor.rs: the
# least a leak-safe operator asks of the apiserver, the machine's ceiling). Default: those seven,
# N=1000. Issue 25's stronger peers, only when named: kopf-expert (bench/kopf/expert.py, its own
# venv from bench/requirements-expert.txt), metacontroller and metacontroller-tuned
# (metacontroller built from its source by bench/metacontroller/build.sh, a DecoratorController
# over DnsZone with bench/metacontroller/hooks.py as its hooks; the source is the git dir in
# ORCHARD_BENCH_METACONTROLLER_GIT, else the tarball in bench/metacontroller/source/; built once
# per commit into ~/.cache/orchard-bench/), and orchard-sharded (orchard-component as three replicas of one
# shard ring, every replica's CPU and memory counted).
#
# Options:
#   --objects N          objects per contender (default 1000; the Python guest: min(N, 200),
#                        harness option --python-objects to change)
#   --contenders LIST    comma-separated, run in this order
#   --out DIR            results directory (default $CARGO_TARGET_DIR/bench/throughput-<time>)
#   --dev                debug builds of orchard and the harness (the CI smoke; never for numbers)
#   --no-build           use the binaries and plugins already built
#   --no-plugins         build the binaries but not the plugins (already built)
#   --no-plot            skip the PNG (and matplotlib)
#   --keep-env           leave an environment this script brought up running
#
# Test environment: the running one named by ORCHARD_TESTENV_ENV (an env file), else this script
# brings one up with tests/env/testenv.sh in ORCHARD_BENCH_TESTENV_DIR (default
# ~/.cache/orchard/bench-testenv) and brings it down at the end. Its PowerDNS keeps zones in
# LMDB (ORCHARD_BENCH_PDNS_BACKEND=sqlite for the tests' SQLite backend, which answers 500
# "database is locked" to concurrent deletes: docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
VENV=${ORCHARD_BENCH_VENV:-$HOME/.cache/orchard/bench-venv}
EXPERT_VENV=${ORCHARD_BENCH_EXPERT_VENV:-$HOME/.cache/orchard/bench-venv-expert}

OBJECTS=1000
CONTENDERS=orchard-component,orchard-warning,orchard-native,kopf,kopf-events,orchard-python,floor
OUT=
PROFILE=release
BUILD=1
BUILD_PLUGINS=1
PLOT=1
KEEP_ENV=0
PASS=()
usage() { sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --objects) OBJECTS=$2; shift 2 ;;
    --objects=*) OBJECTS=${1#*=}; shift ;;
    --contenders) CONTENDERS=$2; shift 2 ;;
    --contenders=*) CONTENDERS=${1#*=}; shift ;;
    --out) OUT=$2; shift 2 ;;
    --out=*) OUT=${1#*=}; shift ;;
    --dev) PROFILE=dev; shift ;;
    --no-build) BUILD=0; BUILD_PLUGINS=0; shift ;;
    --no-plugins) BUILD_PLUGINS=0; shift ;;
    --no-plot) PLOT=0; shift ;;
    --keep-env) KEEP_ENV=1; shift ;;
    -h | --help) usage ;;
    --) shift; PASS+=("$@"); break ;;
    *) PASS+=("$1"); shift ;;
  esac
done
has() { [[ ",$CONTENDERS," == *",$1,"* ]]; }
say() { printf '\n== bench: %s (%ss)\n' "$*" "$SECONDS"; }
BIN_DIR=$TARGET/$([ "$PROFILE" = dev ] && echo debug || echo release)
OUT=${OUT:-$TARGET/bench/throughput-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"

# ---- the venv: kopf and matplotlib from PyPI (bench/requirements.txt), once per change
if has kopf || has kopf-events || [ "$PLOT" = 1 ]; then
  stamp=$VENV/.bench-requirements
  if ! cmp -s bench/requirements.txt "$stamp" 2>/dev/null; then
    say "bench venv ($VENV)"
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r bench/requirements.txt
    cp bench/requirements.txt "$stamp"
  fi
fi

if has kopf-expert; then
  stamp=$EXPERT_VENV/.bench-requirements
  if ! cmp -s bench/requirements-expert.txt "$stamp" 2>/dev/null; then
    say "kopf-expert venv ($EXPERT_VENV)"
    [ -x "$EXPERT_VENV/bin/python" ] || python3 -m venv "$EXPERT_VENV"
    "$EXPERT_VENV/bin/pip" install --quiet --disable-pip-version-check -r bench/requirements-expert.txt
    cp bench/requirements-expert.txt "$stamp"
  fi
fi

# ---- metacontroller, from its source (once per commit, cached)
mc=()
if has metacontroller || has metacontroller-tuned; then
  # From a clone when given, else from the source kept in bench/metacontroller/source/;
  # built once per commit (cached).
  say "metacontroller (bench/metacontroller/build.sh)"
  mc_bin=$(bash bench/metacontroller/build.sh ${ORCHARD_BENCH_METACONTROLLER_GIT:+"$ORCHARD_BENCH_METACONTROLLER_GIT"} | tail -n 1)
  [ -n "$mc_bin" ] && [ -x "$mc_bin" ] && [ -f "$mc_bin-crds.yaml" ] || {
    echo "bench: no metacontroller binary (bench/metacontroller/build.sh failed)" >&2
    exit 1
  }
  mc=(--metacontroller-bin "$mc_bin" --metacontroller-crds "$mc_bin-crds.yaml")
fi

# ---- builds
cargo_profile=(--release)
[ "$PROFILE" = dev ] && cargo_profile=()
if [ "$BUILD_PLUGINS" = 1 ]; then
  if has orchard-python; then
    # `make plugins` without the JavaScript guest, which no contender uses.
    say "plugins (make rust-plugins guest-tools, rabbitmq_vhost.wasm)"
    make --no-print-directory rust-plugins guest-tools \
      "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/plugin/rabbitmq_vhost.wasm"
  else
    say "plugins (make rust-plugins)"
    make --no-print-directory rust-plugins
  fi
fi
if [ "$BUILD" = 1 ]; then
  # With orchard-native in the run, one binary built with the bench-only feature serves every
  # Orchard contender (orchard-component runs its component path, unchanged by the feature):
  # the component/native ratio then compares the same binary.
  features=()
  has orchard-native && features=(--features orchard/bench-native)
  say "orchard, the harness and orchard-floor ($PROFILE ${features[*]})"
  if [ "$PROFILE" = dev ]; then
    # Debug builds as `make test` builds them (cargo test: its dev-dependencies' features), so
    # that the smoke after the tests compiles nothing again: `cargo build -p …` would resolve
    # other features of tokio and zerocopy, i.e. another build of everything above them.
    cargo test --workspace --no-run --test app --test cli "${features[@]}"
  else
    cargo build "${cargo_profile[@]}" -p orchard -p orchard-throughput "${features[@]}"
  fi
fi
bins=("$BIN_DIR/orchard" "$BIN_DIR/orchard-throughput")
has floor && bins+=("$BIN_DIR/orchard-floor")
for f in "${bins[@]}"; do
  [ -x "$f" ] || { echo "bench: $f is missing (run without --no-build)" >&2; exit 1; }
done

# ---- the test environment
if [ -n "${ORCHARD_TESTENV_ENV:-}" ]; then
  [ -f "$ORCHARD_TESTENV_ENV" ] || { echo "bench: ORCHARD_TESTENV_ENV=$ORCHARD_TESTENV_ENV does not exist" >&2; exit 1; }
  ENV_FILE=$ORCHARD_TESTENV_ENV
  say "test environment: $ENV_FILE (given)"
else
  export ORCHARD_TESTENV_DIR=${ORCHARD_BENCH_TESTENV_DIR:-$HOME/.cache/orchard/bench-testenv}
  export ORCHARD_TESTENV_PDNS_BACKEND=${ORCHARD_BENCH_PDNS_BACKEND:-lmdb}
  say "test environment up ($ORCHARD_TESTENV_DIR)"
  bash tests/env/install-deps.sh
  ENV_FILE=$(bash tests/env/testenv.sh up | tail -n 1)
  if [ "$KEEP_ENV" = 0 ]; then
    trap 'say "test environment down"; bash tests/env/testenv.sh down' EXIT
  fi
fi
set -a
# shellcheck disable=SC1090
source "$ENV_FILE"
set +a
export ORCHARD_CACHE_DIR=${ORCHARD_CACHE_DIR:-$TARGET/orchard-cache}

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit+dirty"
native=()
has orchard-native && native=(--orchard-native-bin "$BIN_DIR/orchard")

backend=$(grep -s '^PDNS_BACKEND=' "$(dirname "$ENV_FILE")/internal.env" | cut -d= -f2)
say "harness: PowerDNS backend ${backend:-unknown}; $OBJECTS objects, contenders $CONTENDERS, results in $OUT"
rc=0
"$BIN_DIR/orchard-throughput" \
  --objects "$OBJECTS" --contenders "$CONTENDERS" \
  --orchard-bin "$BIN_DIR/orchard" "${native[@]}" \
  --plugin-dir "$TARGET/wasm32-wasip2/plugin" \
  --venv "$VENV" --kopf-operator bench/kopf/operator.py --floor-bin "$BIN_DIR/orchard-floor" \
  --kopf-expert-venv "$EXPERT_VENV" --kopf-expert-operator bench/kopf/expert.py "${mc[@]}" \
  --testenv-dir "$(dirname "$ENV_FILE")" \
  --out "$OUT" --commit "$commit" "${PASS[@]}" || rc=$?

if [ "$PLOT" = 1 ] && [ -f "$OUT/results.json" ]; then
  "$VENV/bin/python" bench/plot.py "$OUT" || echo "bench: the plot failed" >&2
fi
echo "bench: results in $OUT"
exit "$rc"
