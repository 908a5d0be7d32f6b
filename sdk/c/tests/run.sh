#!/usr/bin/env bash
# Native unit tests of the C SDK (host compiler, sanitizers when available).
set -euo pipefail
C=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
CC=${CC:-cc}
flags=(-g -Wall -Wextra -I"$C")
if "$CC" -fsanitize=address,undefined -x c -o "$out/probe" - <<<'int main(void){return 0;}' 2>/dev/null; then
  flags+=(-fsanitize=address,undefined)
fi
sdk=("$C/orchard_json.c" "$C/orchard_core.c" "$C/orchard_report.c" "$C/orchard_conversion.c")
"$CC" "${flags[@]}" -o "$out/test_sdk" "$C/tests/test_sdk.c" "${sdk[@]}" -lm
"$out/test_sdk"
# The two-version example (sdk/c/examples/greeting): its table and conversions.
"$CC" "${flags[@]}" -o "$out/test_greeting" "$C/tests/test_greeting.c" "${sdk[@]}" -lm
"$out/test_greeting"
