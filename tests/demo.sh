#!/usr/bin/env bash
# The main job (`make demo`): the test environment up, plugins built, the host running, a
# sample zone with records applied, and `kubectl get` showing ID / Available.
#   tests/demo.sh up     bring it all up (idempotent)
#   tests/demo.sh down   stop the host and the environment
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
STATE=${ORCHARD_TESTENV_DIR:-$PWD/.testenv}
PIDFILE=$STATE/pids/demo-host.pid
TARGET=${CARGO_TARGET_DIR:-$PWD/target}

say() { printf '\n== %s\n' "$*"; }

stop_host() {
  if [ -f "$PIDFILE" ]; then
    kill "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE"
  fi
}

case ${1:-up} in
  up)
    say "dependencies (apt packages, wasm32-wasip2, kube-apiserver + etcd from Go modules)"
    bash tests/env/install-deps.sh
    rustup target add wasm32-wasip2 >/dev/null
    say "plugins and host"
    make --no-print-directory plugins
    cargo build -p orchard
    say "test environment"
    bash tests/env/testenv.sh up
    set -a; . "$STATE/env"; set +a
    say "orchard run (log: $STATE/logs/demo-host.log)"
    stop_host
    "$TARGET/debug/orchard" run \
      --plugin "$TARGET/wasm32-wasip2/plugin/pdns_zone.wasm" \
      --plugin "$TARGET/wasm32-wasip2/plugin/pdns_record.wasm" \
      --allow-host "$PDNS_API_URL" --install-crds --admin-addr 127.0.0.1:9090 \
      >"$STATE/logs/demo-host.log" 2>&1 &
    echo $! >"$PIDFILE"
    until kubectl get crd dnsrecords.pdns.orchard.dev >/dev/null 2>&1; do
      kill -0 "$(cat "$PIDFILE")" || { tail -20 "$STATE/logs/demo-host.log"; exit 1; }
      sleep 0.5
    done
    say "sample: a Secret, a zone and two records (docs/examples/demo.yaml)"
    sed -e "s|PDNS_API_URL|$PDNS_API_URL|" -e "s|PDNS_API_KEY|$PDNS_API_KEY|" docs/examples/demo.yaml | kubectl apply -f -
    kubectl wait --for=condition=Available --timeout=60s dnszone/demo dnsrecord/demo-www dnsrecord/demo-mail
    say "kubectl get dnszones,dnsrecords"
    kubectl get dnszones,dnsrecords
    say "PowerDNS has it"
    curl -fsS -H "X-API-Key: $PDNS_API_KEY" "$PDNS_API_URL/api/v1/servers/localhost/zones/demo.example." |
      python3 -c 'import json,sys; z=json.load(sys.stdin); [print(" ", r["name"], r["type"], r["ttl"], [x["content"] for x in r["records"]]) for r in z["rrsets"]]'
    cat <<EOF2

Try it:
  set -a; . $STATE/env; set +a
  kubectl get dnszones,dnsrecords                 # ID / Available / Message
  kubectl edit dnsrecord demo-www                 # change ttl or records; PowerDNS follows
  kubectl delete dnszone demo                     # waits for its records (deletion guard)
  tail -f $STATE/logs/demo-host.log
Tear down:
  make demo-down
EOF2
    ;;
  down)
    stop_host
    bash tests/env/testenv.sh down
    ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
