#!/usr/bin/env bash
# The host's allocation calls per object (docs/benchmarks.md, "Allocations per object"): one
# throughput job of orchard-component (bench/run.sh: N zones created, then deleted), with every
# call of the host into its allocator counted by uprobes on the mimalloc functions the global
# allocator calls. A count that does not depend on the machine's load (two runs of one binary
# agree within 0.1 %), where the job's CPU time moves by ±10 %: the instrument for changes of a
# few per cent.
#
#   bench/allocations.sh [--objects N] [--sites] [--out DIR]
#
#   --objects N   zones in the job (default 200)
#   --sites       also record where the calls come from (perf record --call-graph dwarf; perf
#                 drops most events at this rate, so read the shares) and print them by the
#                 innermost Orchard frame
#   --out DIR     results directory (default $CARGO_TARGET_DIR/bench/allocations-<time>)
#
# Needs: root (uprobes), perf, the release host already built (bench/run.sh builds it; this
# runs it with --no-build), and a test environment as bench/run.sh takes it
# (ORCHARD_TESTENV_ENV).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
HOST=$TARGET/release/orchard
OBJECTS=200
SITES=0
OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --objects) OBJECTS=$2; shift 2 ;;
    --sites) SITES=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "allocations: unknown option $1" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$TARGET/bench/allocations-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
[ -x "$HOST" ] || { echo "allocations: no release host at $HOST (run bench/run.sh once)" >&2; exit 1; }
command -v perf > /dev/null || { echo "allocations: perf is not installed" >&2; exit 1; }

# The probes name the binary's file: made again for this build, removed at the end.
EVENTS=probe_orchard:mi_malloc_aligned,probe_orchard:mi_zalloc_aligned,probe_orchard:mi_realloc_aligned
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2> /dev/null || true
perf probe -q -d 'probe_orchard:*' 2> /dev/null || true
for f in mi_malloc_aligned mi_zalloc_aligned mi_realloc_aligned; do
  perf probe -q -x "$HOST" --add "$f"
done
trap "perf probe -q -d 'probe_orchard:*' 2> /dev/null || true" EXIT

bash bench/run.sh --no-build --no-plot --objects "$OBJECTS" --contenders orchard-component \
  --out "$OUT/job" > "$OUT/job.log" 2>&1 &
job=$!
pid=
for _ in $(seq 1 600); do
  pid=$(pgrep -f "^$HOST run" | head -1 || true)
  [ -n "$pid" ] && break
  sleep 0.1
done
[ -n "$pid" ] || { echo "allocations: the host did not start (see $OUT/job.log)" >&2; wait "$job"; exit 1; }
perf stat -x, -e "$EVENTS" -p "$pid" -o "$OUT/count.csv" &
perfs=($!)
if [ "$SITES" = 1 ]; then
  perf record -q -e "$EVENTS" --call-graph dwarf,16384 -o "$OUT/sites.data" -p "$pid" > "$OUT/record.log" 2>&1 &
  perfs+=($!)
fi
wait "$job" || { echo "allocations: the job failed (see $OUT/job.log)" >&2; exit 1; }
# perf writes its counts once it has seen the host end.
wait "${perfs[@]}" || true
total=$(awk -F, '/probe_orchard/ { s += $1 } END { print s + 0 }' "$OUT/count.csv")
echo "allocation calls: $total over $OBJECTS objects: $((total / OBJECTS)) per object (the host's start included)"
grep 'orchard-component |' "$OUT/job.log" || true

if [ "$SITES" = 1 ]; then
  # Each sampled call, given to the innermost Orchard frame on its stack (or "(none)").
  perf script --no-inline -i "$OUT/sites.data" 2> /dev/null | python3 -c '
import collections, re, sys
sites = collections.Counter(); frames = []; n = 0
def flush():
    global n
    if not frames: return
    n += 1
    names = [re.sub(r"\+0x[0-9a-f]+$", "", f) for f in frames]
    sites[next((x for x in names if re.match(r"<?orchard::", x)), "(none)")[:120]] += 1
for line in sys.stdin:
    if not line.strip(): flush(); frames.clear(); continue
    if line[:1] in "\t ":
        parts = line.strip().split(" ", 1)
        if len(parts) == 2: frames.append(parts[1].rsplit(" (", 1)[0])
flush()
for site, count in sites.most_common(30): print(f"{100 * count / max(n, 1):5.1f} %  {site}")
' | tee "$OUT/sites.txt"
fi
