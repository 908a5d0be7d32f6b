#!/usr/bin/env bash
# The main job (`make demo`): a demo environment of its own, plugins built, the host running
# scoped to one namespace, a sample zone with records applied, and what to do next.
#   tests/demo.sh up      bring it all up (idempotent: a second `up` restarts the host only)
#   tests/demo.sh down    stop the host and the demo environment
#   tests/demo.sh status  is it up, and where
#
# Isolation (docs/quickstart.md): the demo runs its own kube-apiserver, etcd, PowerDNS and
# registries in ${ORCHARD_DEMO_DIR:-<repo>/.demo}, on free loopback ports; `make test` uses
# another state dir (.testenv) and never sees it, so the two run side by side in any order.
# The demo host is also scoped to one namespace (--namespace orchard-demo): a second host
# pointed at the demo's cluster is not disturbed by it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
STATE=$(realpath -m "${ORCHARD_DEMO_DIR:-$PWD/.demo}")
NS=${ORCHARD_DEMO_NAMESPACE:-orchard-demo}
PIDS=$STATE/pids LOGS=$STATE/logs # where testenv.sh keeps its processes: the host is one of them
HOSTLOG=$LOGS/demo-host.log
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
STOP_TIMEOUT=20 # seconds before TERM becomes KILL

say() { printf '\n== %s\n' "$*"; }
log() { printf '[demo] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
testenv() { ORCHARD_TESTENV_DIR=$STATE bash tests/env/testenv.sh "$@"; }
# shellcheck source=tests/env/processes.sh
. tests/env/processes.sh

# The pid of the demo host, if the one we started still runs.
host_pid() { recorded_alive demo-host && recorded_pid demo-host; }

port_free() { python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

up() {
  say "dependencies (apt packages, wasm32-wasip2, kube-apiserver + etcd from Go modules)"
  # Only what the demo runs: the guest toolchains and interop tools are `make test`'s.
  bash tests/env/install-deps.sh --demo
  rustup target add wasm32-wasip2 >/dev/null
  say "plugins and host"
  make --no-print-directory host-plugins
  # The host as `make test` builds it (`cargo test` resolves its dev-dependencies' features:
  # `cargo build -p orchard` would build tokio, wasmtime, kube and 89 more crates a second
  # time, in another flavour, in the `make test` that follows): one small test target of the
  # host's, whose build brings the orchard binary.
  cargo test --workspace --no-run --test app
  say "demo environment (its own apiserver, etcd, PowerDNS, registries in $STATE)"
  testenv up --without-rabbitmq >/dev/null
  set -a; . "$STATE/env"; set +a
  stop_group demo-host
  # The admin server on 9090 when that port is free, else on any free port.
  local admin_port=${ORCHARD_DEMO_ADMIN_PORT:-9090}
  port_free "$admin_port" || admin_port=$(free_port)
  say "orchard run --namespace $NS (log: $HOSTLOG)"
  kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  spawn demo-host "$TARGET/debug/orchard" run \
    --plugin "$TARGET/wasm32-wasip2/plugin/pdns_zone.wasm" \
    --plugin "$TARGET/wasm32-wasip2/plugin/pdns_record.wasm" \
    --allow-host "$PDNS_API_URL" --install-crds --namespace "$NS" \
    --admin-addr "127.0.0.1:$admin_port"
  local pid
  pid=$(recorded_pid demo-host)
  echo "127.0.0.1:$admin_port" >"$STATE/demo-host.admin"
  local deadline=$((SECONDS + 60))
  until kubectl get crd dnsrecords.pdns.orchard.dev dnszones.pdns.orchard.dev >/dev/null 2>&1; do
    host_pid >/dev/null || { echo "the demo host exited; its log:"; tail -20 "$HOSTLOG"; exit 1; }
    ((SECONDS < deadline)) || { echo "the demo host installed no CRDs within 60 s; its log:"; tail -20 "$HOSTLOG"; exit 1; }
    sleep 0.5
  done
  say "sample: a Secret, a zone and two records in namespace $NS (docs/examples/demo.yaml)"
  sed -e "s|PDNS_API_URL|$PDNS_API_URL|" -e "s|PDNS_API_KEY|$PDNS_API_KEY|" docs/examples/demo.yaml |
    kubectl apply -n "$NS" -f -
  kubectl wait -n "$NS" --for=condition=Available --timeout=60s dnszone/demo dnsrecord/demo-www dnsrecord/demo-mail
  say "kubectl get dnszones,dnsrecords -n $NS"
  kubectl get -n "$NS" dnszones,dnsrecords
  say "PowerDNS has it (API), and serves it (DNS on 127.0.0.1:$PDNS_DNS_PORT)"
  curl -fsS -H "X-API-Key: $PDNS_API_KEY" "$PDNS_API_URL/api/v1/servers/localhost/zones/demo.example." |
    python3 -c 'import json,sys; z=json.load(sys.stdin); [print(" ", r["name"], r["type"], r["ttl"], [x["content"] for x in r["records"]]) for r in z["rrsets"]]'
  python3 tests/env/dns_query.py 127.0.0.1 "$PDNS_DNS_PORT" www.demo.example. A
  cat <<EOF2

What runs now (until \`make demo-down\`):
  the demo environment   kube-apiserver $ORCHARD_APISERVER_URL, etcd, PowerDNS $PDNS_API_URL
                         (DNS on 127.0.0.1:$PDNS_DNS_PORT), OCI registries; state in $STATE
  the demo host          orchard run, pid $pid, serving DnsZone and DnsRecord in namespace $NS only
                         admin: http://127.0.0.1:$admin_port/metrics and /readyz
                         log:   $HOSTLOG

Look at it:
  set -a; . $STATE/env; set +a             # KUBECONFIG and the URLs of this environment
  kubectl get dnszones,dnsrecords -A              # ID / Available / Message
  $TARGET/debug/orchard explain dnszone/demo -n $NS   # why: its host, passes, plugin calls
  kubectl edit -n $NS dnsrecord demo-www     # change ttl or records; PowerDNS follows
  kubectl delete -n $NS dnszone demo         # waits for its records (deletion guard)
  tail -f $HOSTLOG

\`make test\` runs beside it in an environment of its own (.testenv) and leaves this one up.
Stop it: make demo-down
EOF2
}

status() {
  local pid
  if pid=$(host_pid); then echo "demo host: pid $pid, namespace $NS, admin $(cat "$STATE/demo-host.admin" 2>/dev/null), log $HOSTLOG"
  else echo "demo host: not running"; fi
  testenv status
}

case ${1:-up} in
  up) up ;;
  down) testenv down ;; # its processes include the demo host
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
