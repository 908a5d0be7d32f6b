#!/usr/bin/env bash
# Issue 25, "100,000 objects on one host" (docs/benchmarks.md "Scale"): one Orchard host, N
# DnsZones created from 8 clients until all Available, a restart over the N (its resync), then
# all deleted; one bench/run.sh per N, results kept as bench/results/<date>-scale-n<N>.json.
#
#   ORCHARD_TESTENV_ENV=<env file> bench/scale.sh [--contender C] [--date D] N [N…]
#
# The environment should be brought up with etcd's quota raised above its 2 GiB default
# (testenv.sh has no flag for it, but etcd reads ETCD_* from its environment, which spawn keeps):
#   ETCD_QUOTA_BACKEND_BYTES=8589934592 ORCHARD_TESTENV_DIR=… tests/env/testenv.sh up
# Uses the binaries and plugins already built (--no-build): CARGO_TARGET_DIR names them.
set -euo pipefail
cd "$(dirname "$0")/.."
CONTENDER=orchard-component
DATE=$(date -u +%Y-%m-%d)
while [ $# -gt 0 ]; do
  case $1 in
    --contender) CONTENDER=$2; shift 2 ;;
    --date) DATE=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
: "${ORCHARD_TESTENV_ENV:?set ORCHARD_TESTENV_ENV to the env file of a running test environment}"
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
port=$(grep -s '^ETCD_CLIENT_PORT=' "$(dirname "$ORCHARD_TESTENV_ENV")/internal.env" | cut -d= -f2 || true)
ETCD_URL=${port:+http://127.0.0.1:$port}
for n in "$@"; do
  out=$TARGET/bench/scale-n$n-$(date -u +%H%M%S)
  echo "== scale: N=$n, $CONTENDER, results in $out ($(date -u +%T))"
  bash bench/run.sh --no-build --no-plot --objects "$n" --contenders "$CONTENDER" --out "$out" \
    -- --settle-s 10 --timeout-s 3600 --restart
  # etcd's database after the job (its own metric; the apiserver compacts every 5 minutes)
  db=null
  if [ -n "$ETCD_URL" ]; then
    db=$(curl -fsS -m 5 "$ETCD_URL/metrics" | awk '/^etcd_mvcc_db_total_size_in_bytes /{print $2}' || echo null)
  fi
  python3 - "$out/results.json" "bench/results/$DATE-scale-n$n.json" "$db" <<'EOF'
import json, sys
src, dst, db = sys.argv[1:]
r = json.load(open(src))
r["scale"] = {"etcd_db_bytes_after": None if db in ("", "null") else float(db)}
json.dump(r, open(dst, "w"), indent=2)
print("kept", dst)
EOF
done
