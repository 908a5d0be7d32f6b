#!/usr/bin/env bash
# The test command (`make test`): everything from a fresh machine to a test report.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"

step() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }

step "dependencies"
bash tests/env/install-deps.sh
rustup target add wasm32-wasip2 >/dev/null

step "plugins (wasm32-wasip2)"
make --no-print-directory plugins

step "SDK unit tests (Python, JavaScript, Go, C)"
python3 -m unittest discover -s sdk/python/tests
(cd sdk/js && npm test --silent)
(cd sdk/go && GOPROXY=off GOTOOLCHAIN=local go test ./...)
bash sdk/c/tests/run.sh

step "host and test binaries"
# (`cargo test` builds the orchard binary too: integration tests need it, same features.)
cargo test --workspace --no-run

step "lints and API docs (rustfmt, clippy pedantic, rustdoc, all as errors)"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS=-Dwarnings cargo doc --no-deps --workspace --quiet

step "test environment up"
bash tests/env/testenv.sh up
trap 'step "test environment down"; bash tests/env/testenv.sh down' EXIT
set -a
# shellcheck disable=SC1091
source "${ORCHARD_TESTENV_DIR:-.testenv}/env"
set +a

step "tests"
cargo test --workspace --no-fail-fast -- --test-threads="${ORCHARD_TEST_THREADS:-2}"

step "throughput bench smoke (N=20, orchard-component, orchard-warning, kopf, kopf-events and floor; not timed)"
# Only that every object became Available and was deleted (bench/run.sh exits non-zero
# otherwise); debug builds from the step above, the running environment.
ORCHARD_TESTENV_ENV="${ORCHARD_TESTENV_DIR:-.testenv}/env" bash bench/run.sh --objects 20 \
  --contenders orchard-component,orchard-warning,kopf,kopf-events,floor --dev --no-plugins --no-plot --out target/bench/smoke -- --timeout-s 120 --settle-s 0
step "done"
