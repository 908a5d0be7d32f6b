#!/usr/bin/env bash
# The dashboard's picture from real data (docs/img/dashboard.png): a test environment of its
# own, one host serving DnsZone and DnsRecord in one namespace, a Prometheus scraping the host's
# /metrics every 5 s (with the chart's alerts loaded), ≈10 minutes of DnsZones, then
# render-dashboard.py. Everything listens on 127.0.0.1 only. For the docs, not for CI.
#
#   deploy/helm/orchard/tools/dashboard-demo.sh            all of it: build, up, workload, 3 min, render, down
#   deploy/helm/orchard/tools/dashboard-demo.sh build      prometheus + promtool, the plugins, the host, the venv
#   deploy/helm/orchard/tools/dashboard-demo.sh up         the env, the host, Prometheus (prints their URLs)
#   deploy/helm/orchard/tools/dashboard-demo.sh workload   the DnsZones (≈10 min; WORKLOAD_SCALE=0.1 for a quick try)
#   deploy/helm/orchard/tools/dashboard-demo.sh render     the PNG, since Prometheus started (or the last DASH_MINUTES)
#   deploy/helm/orchard/tools/dashboard-demo.sh down       stops the env, the host and Prometheus
#
# The same by hand (what `up` does), from the repo root:
#   bash tests/env/build-tools.sh        # helm, cosign, oras, promtool, cached by version
#   (cd "$(mktemp -d)" && go mod init x && go get github.com/prometheus/prometheus@v0.316.0 &&
#     CGO_ENABLED=0 go build -tags remove_all_sd -o ~/.cache/orchard-testenv/tools/prometheus-v0.316.0-remove_all_sd \
#     github.com/prometheus/prometheus/cmd/prometheus)         # no web UI assets, no service discovery: the API is enough
#   cargo build --profile plugin --target wasm32-wasip2 -p pdns-zone -p pdns-record   # (make plugins)
#   cargo build -p orchard
#   ORCHARD_TESTENV_DIR=/tmp/dash-env bash tests/env/testenv.sh up --without-rabbitmq
#   set -a; . /tmp/dash-env/env; set +a
#   kubectl create namespace orchard-dashboard
#   $CARGO_TARGET_DIR/debug/orchard run --plugin .../pdns_zone.wasm --plugin .../pdns_record.wasm \
#     --allow-host "$PDNS_API_URL" --install-crds --namespace orchard-dashboard \
#     --admin-addr 127.0.0.1:$ADMIN &
#   prometheus --config.file /tmp/dash-env/prometheus/prometheus.yml \
#     --storage.tsdb.path /tmp/dash-env/prometheus/data --web.listen-address 127.0.0.1:$PROM &
#   deploy/helm/orchard/tools/dashboard-demo.sh workload
#   ~/.cache/orchard/dashboard-venv/bin/python deploy/helm/orchard/tools/render-dashboard.py \
#     --prometheus http://127.0.0.1:$PROM --minutes 15 --out docs/img/dashboard.png
#   ORCHARD_TESTENV_DIR=/tmp/dash-env bash tests/env/testenv.sh down
#
# The host and Prometheus are recorded in the env's pids/ (tests/env/processes.sh), so
# `testenv.sh down` stops them with the rest.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$REPO"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
STATE=$(realpath -m "${ORCHARD_TESTENV_DIR:-/tmp/dash-env}")
export ORCHARD_TESTENV_DIR=$STATE
PIDS=$STATE/pids LOGS=$STATE/logs
STOP_TIMEOUT=20
NS=${DASH_NAMESPACE:-orchard-dashboard}
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
TOOLS=${ORCHARD_TESTENV_CACHE:-$HOME/.cache/orchard-testenv}/tools
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
PROMETHEUS=$TOOLS/prometheus-$PROMETHEUS_VERSION-remove_all_sd
VENV=${DASH_VENV:-$HOME/.cache/orchard/dashboard-venv}
OUT=${DASH_OUT:-$REPO/docs/img/dashboard.png}
SCALE=${WORKLOAD_SCALE:-1} # the workload's pauses are multiplied by this

log() { printf '[dashboard] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck source=tests/env/processes.sh
. tests/env/processes.sh
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pause() { local s; s=$(python3 -c "print(max(1, round($1 * $SCALE)))"); log "… ${s}s"; sleep "$s"; }

build() {
  bash tests/env/build-tools.sh >/dev/null
  if [ ! -x "$PROMETHEUS" ]; then
    log "building prometheus $PROMETHEUS_VERSION (cmd/prometheus)"
    local work start=$SECONDS
    work=$(mktemp -d)
    (
      cd "$work"
      go mod init orchard.dev/tools-prometheus >/dev/null 2>&1
      GOFLAGS=-mod=mod go get "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" >&2
      # The demo scrapes one static target: no service discovery (the cloud SDKs it would
      # compile in are most of Prometheus's build), as tests/env/build-tools.sh builds promtool.
      CGO_ENABLED=0 GOFLAGS=-mod=mod go build -tags remove_all_sd -trimpath -ldflags "-s -w" \
        -o "$PROMETHEUS.tmp" github.com/prometheus/prometheus/cmd/prometheus >&2
    )
    mv "$PROMETHEUS.tmp" "$PROMETHEUS"
    rm -rf "$work"
    log "prometheus built in $((SECONDS - start)) s"
  fi
  rustup target add wasm32-wasip2 >/dev/null
  cargo build --profile plugin --target wasm32-wasip2 -p pdns-zone -p pdns-record
  cargo build -p orchard
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q 'matplotlib==3.11.2'
  fi
}

load_env() {
  [ -f "$STATE/env" ] || die "no environment in $STATE: run '$0 up' first"
  set -a
  # shellcheck disable=SC1091
  . "$STATE/env"
  set +a
  # shellcheck disable=SC1091
  [ -f "$STATE/dashboard.env" ] && . "$STATE/dashboard.env"
  return 0
}

up() {
  bash tests/env/testenv.sh up --without-rabbitmq >/dev/null
  load_env
  stop_group dash-host dash-prometheus
  local admin prom
  admin=$(free_port)
  prom=$(free_port)
  kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  log "orchard run --namespace $NS, admin 127.0.0.1:$admin (log: $LOGS/dash-host.log)"
  RUST_LOG=info NO_COLOR=1 ORCHARD_CACHE_DIR="$TARGET/orchard-cache" spawn dash-host \
    "$TARGET/debug/orchard" run \
    --plugin "$TARGET/wasm32-wasip2/plugin/pdns_zone.wasm" \
    --plugin "$TARGET/wasm32-wasip2/plugin/pdns_record.wasm" \
    --allow-host "$PDNS_API_URL" --install-crds --namespace "$NS" \
    --admin-addr "127.0.0.1:$admin"
  local deadline=$((SECONDS + 90))
  until curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1; do
    recorded_alive dash-host || { tail -20 "$LOGS/dash-host.log"; die "the host exited"; }
    ((SECONDS < deadline)) || { tail -20 "$LOGS/dash-host.log"; die "the host is not ready within 90 s"; }
    sleep 0.5
  done

  # The chart's alerts, as the PrometheusRule renders them (job "orchard-metrics": the name of
  # the chart's Service, which a ServiceMonitor gives as the job).
  mkdir -p "$STATE/prometheus"
  rm -rf "$STATE/prometheus/data"
  "$TOOLS/helm" template orchard deploy/helm/orchard -n orchard-system --kube-version "$ORCHARD_K8S_VERSION" \
    --set metrics.prometheusRule.enabled=true --show-only templates/prometheusrule.yaml |
    sed -n '/^spec:/,$p' | sed -e '1d' -e 's/^  //' >"$STATE/prometheus/alerts.yaml"
  "$TOOLS/promtool" check rules "$STATE/prometheus/alerts.yaml" >&2
  cat >"$STATE/prometheus/prometheus.yml" <<EOF
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files: [alerts.yaml]
scrape_configs:
  - job_name: orchard-metrics
    static_configs:
      - targets: ["127.0.0.1:$admin"]
EOF
  "$TOOLS/promtool" check config "$STATE/prometheus/prometheus.yml" >&2
  log "prometheus on 127.0.0.1:$prom (log: $LOGS/dash-prometheus.log)"
  spawn dash-prometheus "$PROMETHEUS" \
    --config.file "$STATE/prometheus/prometheus.yml" \
    --storage.tsdb.path "$STATE/prometheus/data" \
    --web.listen-address "127.0.0.1:$prom"
  deadline=$((SECONDS + 60))
  until curl -fsS "http://127.0.0.1:$prom/-/ready" >/dev/null 2>&1; do
    recorded_alive dash-prometheus || { tail -20 "$LOGS/dash-prometheus.log"; die "prometheus exited"; }
    ((SECONDS < deadline)) || die "prometheus is not ready within 60 s"
    sleep 0.5
  done
  printf 'DASH_ADMIN=127.0.0.1:%s\nDASH_PROMETHEUS=http://127.0.0.1:%s\nDASH_STARTED=%s\n' \
    "$admin" "$prom" "$(date +%s)" >"$STATE/dashboard.env"
  echo "host admin http://127.0.0.1:$admin/metrics, prometheus http://127.0.0.1:$prom"
}

# A Secret: name url apiKey.
secret() {
  printf -- '---\napiVersion: v1\nkind: Secret\nmetadata: {name: %s}\nstringData: {url: "%s", apiKey: "%s"}\n' "$1" "$2" "$3"
}

# DnsZones zNNN: secretName first last [nameserver] (default ns1.zNNN.dash.example.).
zones() {
  local secret=$1 first=$2 last=$3 ns=${4:-} i
  for ((i = first; i <= last; i++)); do
    printf -- '---\napiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {name: z%03d}\nspec:\n  credentialsRef: {secretName: %s}\n  resource: {name: z%03d.dash.example., nameservers: ["%s"]}\n' \
      "$i" "$secret" "$i" "${ns:-$(printf 'ns1.z%03d.dash.example.' "$i")}"
  done
}

# Records in zone zNNN: first last.
records() {
  local i
  for ((i = $1; i <= $2; i++)); do
    printf -- '---\napiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsRecord\nmetadata: {name: z%03d-www}\nspec:\n  credentialsRef: {secretName: pdns}\n  resource: {zoneRef: z%03d, name: www, type: A, ttl: 300, records: [192.0.2.%d]}\n' \
      "$i" "$i" "$((i % 250 + 1))"
  done
}

apply() { kubectl apply -n "$NS" -f - >/dev/null; }
delete_zones() { # first last
  local names=() i
  for ((i = $1; i <= $2; i++)); do names+=("$(printf 'z%03d' "$i")"); done
  kubectl delete -n "$NS" dnszone "${names[@]}" --wait=false >/dev/null
}
counts() {
  kubectl get -n "$NS" dnszones -o json | python3 -c '
import collections, json, sys
c = collections.Counter()
for o in json.load(sys.stdin)["items"]:
    a = [x for x in o.get("status", {}).get("conditions", []) if x["type"] == "Available"]
    c[(a[0]["status"] + " " + a[0].get("reason", "")) if a else "no condition"] += 1
print("  zones:", dict(sorted(c.items())))' >&2
}

workload() {
  load_env
  local start=$SECONDS
  log "t=0: Secrets (good, wrong key, a destination outside the allow-list); 60 zones"
  {
    secret pdns "$PDNS_API_URL" "$PDNS_API_KEY"
    secret pdns-wrong-key "$PDNS_API_URL" not-the-key
    secret pdns-elsewhere "http://127.0.0.1:9/" "$PDNS_API_KEY"
    zones pdns 1 60
  } | apply
  pause 120
  counts
  log "t=2m: 60 more zones, 10 with a nameserver PowerDNS refuses (failed), 1 whose Secret is missing; records in 20 zones"
  {
    zones pdns 61 120
    # A label of 70 characters: valid for the CRD's schema, refused by PowerDNS (max 63).
    zones pdns 121 130 "ns1-$(printf 'x%.0s' $(seq 70)).dash.example."
    zones pdns-missing 131 131
    records 1 20
  } | apply
  pause 120
  counts
  log "t=4m: 5 zones with a wrong API key (failed), 5 whose API is outside the allow-list (retrying)"
  {
    zones pdns-wrong-key 132 136
    zones pdns-elsewhere 137 141
  } | apply
  pause 60
  counts
  log "t=5m: 59 more zones (200 in all)"
  zones pdns 142 200 | apply
  pause 60
  counts
  log "t=6m: delete 30 zones and the records in 20 of them (a zone waits for its records: the deletion guard)"
  delete_zones 1 30
  pause 10
  # shellcheck disable=SC2046
  kubectl delete -n "$NS" dnsrecord $(for i in $(seq 1 20); do printf 'z%03d-www ' "$i"; done) --wait=false >/dev/null
  pause 50
  counts
  log "t=7m: fix 5 of the 10 refused zones (a new spec is a new pass)"
  zones pdns 121 125 | apply
  pause 60
  counts
  log "t=8m: delete the 5 with a wrong key, and 40 more"
  delete_zones 132 136
  delete_zones 151 190
  pause 120
  counts
  log "workload done in $((SECONDS - start)) s"
}

render() {
  load_env
  # Since Prometheus started (nothing before), unless DASH_MINUTES says otherwise.
  local minutes=${DASH_MINUTES:-$(python3 -c "import time; print(round((time.time() - $DASH_STARTED) / 60, 2))")}
  "$VENV/bin/python" deploy/helm/orchard/tools/render-dashboard.py \
    --prometheus "$DASH_PROMETHEUS" --minutes "$minutes" --out "$OUT"
  log "alerts (ALERTS):"
  curl -fsS "$DASH_PROMETHEUS/api/v1/alerts" | python3 -c '
import json, sys
for a in json.load(sys.stdin)["data"]["alerts"]:
    print("  ", a["labels"]["alertname"], a["state"], {k: v for k, v in a["labels"].items() if k != "alertname"})' >&2
}

down() { bash tests/env/testenv.sh down; }

case ${1:-all} in
  build) build ;;
  up) up ;;
  workload) workload ;;
  render) render ;;
  down) down ;;
  all)
    build
    up
    trap 'down' EXIT
    sleep 60 # a minute of an idle host first
    workload
    sleep 180 # three quiet minutes: what settles, and what stays failed or unsettled
    render
    ;;
  *) echo "usage: $0 [all|build|up|workload|render|down]" >&2; exit 2 ;;
esac
