#!/usr/bin/env bash
# cargo's runner for the test binaries of `make test` (tests/run.sh sets it as
# CARGO_TARGET_<triple>_RUNNER for the tests step only): runs one test binary with libtest's
# per-test times (`--report-time`, an unstable libtest option that RUSTC_BOOTSTRAP=1 unlocks at
# run time; nothing is compiled differently), keeps its output in $ORCHARD_TEST_TIMES/<suite>.out
# and its wall time in $ORCHARD_TEST_TIMES/suites.tsv, for tests/test-times.py's table.
set -uo pipefail
bin=$1; shift
dir=${ORCHARD_TEST_TIMES:?set by tests/run.sh}
name=$(basename "$bin"); name=${name%-*} # target/debug/deps/smoke-0123abcd… -> smoke
suite="${CARGO_PKG_NAME:-?}/$name"
# Two binaries of one package can share a name (orchard's lib and bin unit tests).
out="$dir/${suite//\//__}.out"
n=1; while [ -e "$out" ]; do n=$((n + 1)); out="$dir/${suite//\//__}.$n.out"; done
start=$(date +%s.%N)
RUSTC_BOOTSTRAP=1 "$bin" "$@" -Zunstable-options --report-time 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
end=$(date +%s.%N)
printf '%s\t%s\t%s\t%s\n' "$suite" "$(python3 -c "print(round($end - $start, 1))")" "$rc" "$out" >>"$dir/suites.tsv"
exit "$rc"
