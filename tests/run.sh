#!/usr/bin/env bash
# The test command (`make test`): everything from a fresh machine to a test report.
#
# It brings up a test environment of its own (tests/env/testenv.sh in .testenv, on free loopback
# ports) and brings it down at the end, even when a test fails. A demo left running by
# `make demo` lives in another state dir (.demo) with its own apiserver: this run neither sees
# nor stops it. It ends with the wall time of each step, each suite and the ten slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
REPO=$PWD
DEMO_STATE=$(realpath -m "${ORCHARD_DEMO_DIR:-$REPO/.demo}")
# A shell that sourced the demo's env file (as the demo's last lines suggest) carries its
# ORCHARD_TESTENV_DIR; the tests never use the demo's environment.
if [ -n "${ORCHARD_TESTENV_DIR:-}" ] && [ "$(realpath -m "$ORCHARD_TESTENV_DIR")" = "$DEMO_STATE" ]; then
  echo "make test: ORCHARD_TESTENV_DIR is the demo's ($DEMO_STATE); the tests use their own, $REPO/.testenv"
  unset ORCHARD_TESTENV_DIR
fi
export ORCHARD_TESTENV_DIR=$(realpath -m "${ORCHARD_TESTENV_DIR:-$REPO/.testenv}")
TIMES=$(realpath -m "${CARGO_TARGET_DIR:-target}")/test-times
rm -rf "$TIMES" && mkdir -p "$TIMES"

step_name="" step_start=$SECONDS
end_step() {
  if [ -n "$step_name" ]; then printf '%s\t%s\n' "$step_name" "$((SECONDS - step_start))" >>"$TIMES/steps.tsv"; fi
  step_name=""
}
step() { end_step; step_name=$*; step_start=$SECONDS; printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }
summary() {
  end_step
  python3 tests/test-times.py "$TIMES" || true
  # Last, where a CI log's tail shows it: which throughput contender was not ok, and why.
  if [ -n "${smoke_rc:-}" ] && [ "$smoke_rc" != 0 ]; then
    echo "make test: the throughput bench smoke failed (rc $smoke_rc):"
    python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r.get("ok") is not True: print("  ", r["contender"] + ":", r.get("error") or r.get("not_ok"))' \
      target/bench/smoke/results.json 2>/dev/null || echo "   (no results: see its output above)"
  fi
}

echo "make test: test environment $ORCHARD_TESTENV_DIR (started here on free loopback ports, stopped at the end)"
if [ -f "$DEMO_STATE/pids/demo-host.pid" ]; then
  echo "make test: the demo in $DEMO_STATE has an environment of its own; this run leaves it alone"
fi
trap summary EXIT

step "dependencies"
bash tests/env/install-deps.sh --without-interop-tools
rustup target add wasm32-wasip2 >/dev/null
# The interop tools (helm, cosign, oras, promtool: Go builds, minutes each on a cold machine)
# are needed only by the tests step: built beside the steps up to it, awaited before it.
bash tests/env/build-tools.sh >"$TIMES/interop-tools.log" 2>&1 &
interop_pid=$!
# metacontroller, a contender of the throughput smoke (from bench/metacontroller/source/; a Go
# build of a minute or two once, cached by commit), likewise beside the steps, awaited before the
# smoke.
bash bench/metacontroller/build.sh >"$TIMES/metacontroller.log" 2>&1 &
metacontroller_pid=$!

step "plugins (wasm32-wasip2)"
make --no-print-directory plugins

step "SDK unit tests (Python, JavaScript, Go, C)"
# With the SDK's venv: the pinned requests the plugins bundle (sdk/python/requirements.txt).
"${ORCHARD_PYTHON_VENV:-$HOME/.cache/orchard/python-venv}/bin/python" -m unittest discover -s sdk/python/tests
(cd sdk/js && npm test --silent)
(cd sdk/go && GOPROXY=off GOTOOLCHAIN=local go test ./...)
bash sdk/go/test.sh sdk/go/examples/webhook
bash sdk/c/tests/run.sh

step "host and test binaries"
# (`cargo test` builds the orchard binary too: integration tests need it, same features.)
cargo test --workspace --no-run
# The C SDK's two-version example as a real component, described and converted by the CLI.
bash sdk/c/tests/component.sh "$(realpath -m "${CARGO_TARGET_DIR:-target}")/debug/orchard"
# The Python SDK's two-version example likewise (and a one-version plugin that lists none).
bash sdk/python/tests/component.sh "$(realpath -m "${CARGO_TARGET_DIR:-target}")/debug/orchard" \
  "$(realpath -m "${CARGO_TARGET_DIR:-target}")/wasm32-wasip2/plugin/rabbitmq_vhost.wasm" \
  "$(realpath -m "${CARGO_TARGET_DIR:-target}")/wasm32-wasip2/plugin/python_versioned_example.wasm"
# A pre-initialised Go component: package init is the build's, each instance's random state its own.
bash sdk/go/tests/component.sh "$(realpath -m "${CARGO_TARGET_DIR:-target}")/debug/orchard"

step "lints and API docs (rustfmt, clippy pedantic, rustdoc, all as errors)"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS=-Dwarnings cargo doc --no-deps --workspace --quiet

step "test environment up ($ORCHARD_TESTENV_DIR)"
bash tests/env/testenv.sh up
trap 'step "test environment down"; bash tests/env/testenv.sh down; summary' EXIT
set -a
# shellcheck disable=SC1091
source "$ORCHARD_TESTENV_DIR/env"
set +a

step "interop tools (helm, cosign, oras, promtool; built beside the steps above)"
if ! wait "$interop_pid"; then
  echo "make test: tests/env/build-tools.sh failed; the end of its log ($TIMES/interop-tools.log):"
  tail -n 20 "$TIMES/interop-tools.log"
  exit 1
fi

step "tests"
# Each test binary through tests/timed-test.sh: its wall time and every test's.
CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$REPO/tests/timed-test.sh" ORCHARD_TEST_TIMES=$TIMES \
  cargo test --workspace --no-fail-fast -- --test-threads="${ORCHARD_TEST_THREADS:-2}"

step "throughput bench smoke (N=20, orchard-component, orchard-warning, orchard-sharded, kopf, kopf-events, kopf-expert, metacontroller, metacontroller-tuned and floor; not timed)"
if ! wait "$metacontroller_pid"; then
  echo "make test: bench/metacontroller/build.sh failed; the end of its log ($TIMES/metacontroller.log):"
  tail -n 20 "$TIMES/metacontroller.log"
  exit 1
fi
# Only that every object became Available and was deleted (bench/run.sh exits non-zero
# otherwise); debug builds from the step above, the running environment.
smoke_rc=0
ORCHARD_TESTENV_ENV="$ORCHARD_TESTENV_DIR/env" bash bench/run.sh --objects 20 \
  --contenders orchard-component,orchard-warning,orchard-sharded,kopf,kopf-events,kopf-expert,metacontroller,metacontroller-tuned,floor --dev --no-plugins --no-plot --out target/bench/smoke -- --timeout-s 120 --settle-s 0 ||
  smoke_rc=$?
[ "$smoke_rc" = 0 ] || exit "$smoke_rc"
step "done"
