#!/usr/bin/env bash
# End to end, on a real component: builds the fixture sdk/go/tests/preinit with sdk/go/build.sh
# (pre-initialised: package init runs at build time) and calls its get-by-id in fresh instances
# through the host CLI: what package init drew is the same in each (the build's), what a call
# draws — math/rand/v2, a new map's order — differs (the SDK reseeds each instance), and the
# monotonic clock measures a sleep, and each instance reads its own environment (the call deadline).
#   sdk/go/tests/component.sh [path/to/orchard]      (default: orchard on PATH)
set -euo pipefail
GO_SDK=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ORCHARD=${1:-orchard}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fixture=$GO_SDK/tests/preinit

bash "$GO_SDK/build.sh" "$fixture" "$out/random.wasm"
for i in 1 2 3; do
  "$ORCHARD" invoke "$out/random.wasm" get-by-id --object "$fixture/random.yaml" --id r \
    --call-timeout-ms $((4000 + i)) >"$out/draw$i.json"
done
python3 - "$out" <<'PY'
import json, sys
draws = [json.load(open(f"{sys.argv[1]}/draw{i}.json")) for i in (1, 2, 3)]
states = [d["Ok"]["state"] for d in draws]
assert len({s["atInit"] for s in states}) == 1, f"package init ran in an instance: {states}"
assert len({s["inCall"] for s in states}) == 3, f"instances drew the same numbers: {states}"
assert len({s["mapSeed"] for s in states}) > 1, f"every instance's maps had one order: {states}"
assert all(s["sleptOK"] for s in states), f"the monotonic clock did not measure a sleep: {states}"
assert [s["env"] for s in states] == ["4001", "4002", "4003"], f"not each instance's environment: {states}"
print("sdk/go/tests/component.sh: ok (3 instances of a pre-initialised component)")
PY
