#!/usr/bin/env bash
# Orchard's test environment: real kube-apiserver + etcd, PowerDNS Authoritative, an OCI registry,
# RabbitMQ and an OpenTelemetry Collector, all on loopback, all owned by this script.
#
#   tests/env/testenv.sh up [--without-rabbitmq]   start (no-op when already up and healthy)
#   tests/env/testenv.sh down                      stop what `up` started (logs are kept)
#   tests/env/testenv.sh status                    what runs, and is it healthy
#   tests/env/testenv.sh env                       print the path of the env file
#   tests/env/testenv.sh rabbitmqctl ARGS...       rabbitmqctl against the env's RabbitMQ node
#
# RabbitMQ starts by default (it adds ~10 s, in parallel with the apiserver); skip it with
# --without-rabbitmq or ORCHARD_TESTENV_RABBITMQ=0. `up` on an env without RabbitMQ while RabbitMQ
# is wanted restarts the env from scratch.
#
# PowerDNS keeps its zones in SQLite (the tests' backend), or in LMDB with
# ORCHARD_TESTENV_PDNS_BACKEND=lmdb (the throughput bench's: SQLite answers 500 "database is
# locked" to concurrent zone deletes, which would measure SQLite, not the contenders). Neither
# syncs to disk: the env is thrown away. `up` with another backend than the running env's
# restarts it from scratch.
#
# The OpenTelemetry Collector (tests/env/otelcol, built by build-otelcol.sh) takes OTLP/HTTP and
# writes every trace it receives as one OTLP JSON line to otel/traces.jsonl, so a test can read
# back the spans a host exported.
#
# State lives in ${ORCHARD_TESTENV_DIR:-<repo>/.testenv}: pki/, data dirs, pids/, logs/, the
# kubeconfigs and the env file that the test suites read (see docs/testing.md).
#
# Every daemon is started as the leader of its own process group (setsid) and recorded in
# pids/<name>.pid as "<pid> <starttime>"; `down` signals only process groups whose leader still has
# that pid *and* that start time, so it never touches anything it did not start.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
STATE=$(realpath -m "${ORCHARD_TESTENV_DIR:-$REPO_ROOT/.testenv}")
case $STATE in
  *[[:space:]\'\"\$\`\\]*) echo "testenv: state dir '$STATE' must not contain blanks or quotes" >&2; exit 2 ;;
esac
K8S_VERSION=${K8S_VERSION:-v1.34.4}
export K8S_VERSION

ENV_FILE=$STATE/env
PIDS=$STATE/pids
LOGS=$STATE/logs
PKI=$STATE/pki
INTERNAL=$STATE/internal.env # ports and paths that are not part of the public env file

HEALTH_TIMEOUT=${ORCHARD_TESTENV_TIMEOUT:-90} # seconds, per service
STOP_TIMEOUT=20                               # seconds before TERM becomes KILL

log() { printf '[testenv] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --------------------------------------------------------------------------------------------
# process bookkeeping (spawn, recorded_alive, recorded_pid, stop_group)

# shellcheck source=tests/env/processes.sh
. "$SCRIPT_DIR/processes.sh"

stop_all() {
  [ -d "$PIDS" ] || return 0
  local f name first=() last=()
  for f in "$PIDS"/*.pid; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .pid)
    case $name in
      etcd | epmd) last+=("$name") ;; # what the others depend on goes last
      *) first+=("$name") ;;
    esac
  done
  stop_group "${first[@]+"${first[@]}"}"
  stop_group "${last[@]+"${last[@]}"}"
  rm -f "$PIDS"/*.pid
}

# --------------------------------------------------------------------------------------------
# health checks (one attempt each; wait_healthy polls them)

load_internal() { [ -f "$INTERNAL" ] && . "$INTERNAL"; }

check_etcd() { curl -fsS -m 2 "http://127.0.0.1:$ETCD_CLIENT_PORT/health" | grep -q '"health":"true"'; }
check_apiserver() {
  curl -fsS -m 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null &&
  # readyz can pass a moment before the namespace controller has created "default"
  curl -fsS -m 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/default" >/dev/null
}
check_pdns() { curl -fsS -m 2 -H "X-API-Key: $PDNS_API_KEY" "http://127.0.0.1:$PDNS_WEB_PORT/api/v1/servers" >/dev/null; }
check_registry() { curl -fsS -m 2 "http://127.0.0.1:$REGISTRY_PORT/v2/" >/dev/null; }
# The authenticated registry answers 401 to an anonymous request and 200 with its user.
check_registry_auth() {
  curl -fsS -m 2 -u "$REGISTRY_AUTH_USER:$REGISTRY_AUTH_PASSWORD" "http://127.0.0.1:$REGISTRY_AUTH_PORT/v2/" >/dev/null
}
check_rabbitmq() {
  curl -fsS -m 3 -u "$RABBITMQ_USER:$RABBITMQ_PASSWORD" "http://127.0.0.1:$RABBITMQ_MGMT_PORT/api/overview" >/dev/null &&
    curl -fsS -m 3 --cacert "$PKI/ca.crt" -u "$RABBITMQ_USER:$RABBITMQ_PASSWORD" \
      "https://127.0.0.1:${RABBITMQ_MGMT_TLS_PORT:?}/api/overview" >/dev/null
}
# An empty OTLP/JSON request: 200 means the receiver is up and parses JSON, and it writes nothing
# (the receiver drops a request without spans before the pipeline), so polling it leaves no trace
# in the file.
check_otelcol() {
  curl -fsS -m 2 -H 'Content-Type: application/json' -d '{}' \
    "http://127.0.0.1:${OTLP_HTTP_PORT:?}/v1/traces" >/dev/null
}
check_rabbitmq_guest() { curl -fsS -m 3 -u guest:guest "http://127.0.0.1:$RABBITMQ_MGMT_PORT/api/overview" >/dev/null; }

# wait_healthy <process-name> <check-function> [log-file]: poll until healthy, with a deadline;
# on failure show the tail of the log and fail.
wait_healthy() {
  local name=$1 check=$2 logf=${3:-$LOGS/$1.log}
  local deadline=$((SECONDS + HEALTH_TIMEOUT))
  until "$check" 2>/dev/null; do
    if ! recorded_alive "$name"; then
      log "$name exited; last lines of $logf:"
      tail -n 40 "$logf" >&2 || true
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "$name not healthy after ${HEALTH_TIMEOUT}s; last lines of $logf:"
      tail -n 40 "$logf" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

services() { # the services of the running env, from its pid files
  local f
  for f in "$PIDS"/*.pid; do [ -e "$f" ] && basename "$f" .pid; done
}

is_up_and_healthy() { # [want-rabbitmq]
  local want_rabbitmq=${1:-0} want_backend=${PDNS_BACKEND:-sqlite}
  [ -f "$ENV_FILE" ] && [ -f "$INTERNAL" ] || return 1
  ( # subshell: loading internal.env must not clobber the caller's variables
  PDNS_BACKEND=sqlite # envs from before the variable existed
  load_internal
  [ "$PDNS_BACKEND" = "$want_backend" ] || return 1
  local svc
  # An env from before the collector existed has no otelcol.pid: it is restarted, with the keys.
  for svc in etcd kube-apiserver pdns registry registry-auth otelcol; do recorded_alive "$svc" || return 1; done
  { check_etcd && check_apiserver && check_pdns && check_registry && check_registry_auth && check_otelcol; } 2>/dev/null || return 1
  if [ "$want_rabbitmq" = 1 ] || [ "$WANT_RABBITMQ" = 1 ]; then
    [ "$WANT_RABBITMQ" = 1 ] || return 1 # asked for now, but the running env has none
    recorded_alive epmd && recorded_alive rabbitmq && check_rabbitmq 2>/dev/null || return 1
  fi
  )
}

# --------------------------------------------------------------------------------------------
# pieces of `up`

free_ports() { # n -> n distinct free TCP ports on 127.0.0.1
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

random_token() { openssl rand -hex 16; }

make_pki() {
  mkdir -p "$PKI"
  cd "$PKI"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 3650 -subj /CN=orchard-testenv-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  # sign <name> <subject> <extensions>
  sign() {
    openssl req -new "${ec[@]}" -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
  }
  sign apiserver /CN=kube-apiserver "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  local client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  # RabbitMQ's management API over HTTPS too: a destination signed by the cluster's own CA,
  # which plugins reach only when the host trusts it (--plugin-ca-file).
  sign rabbitmq /CN=rabbitmq "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
  sign admin "/O=system:masters/CN=orchard-admin" "$client"
  sign unprivileged "/CN=orchard-unprivileged" "$client"
  # kube-apiserver talks to etcd as a client but etcd runs plain HTTP on loopback; no cert needed.
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
  openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
  chmod 600 ./*.key
  cd - >/dev/null
}

write_kubeconfig() { # file user
  local b64='base64 -w0'
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: orchard-testenv
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 <"$PKI/$2.crt")
    client-key-data: $($b64 <"$PKI/$2.key")
contexts:
- name: orchard-testenv-$2
  context:
    cluster: orchard-testenv
    user: $2
    namespace: default
current-context: orchard-testenv-$2
EOF
  chmod 600 "$1"
}

start_etcd() {
  spawn etcd "$K8S_BIN/etcd" \
    --name orchard-testenv \
    --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "orchard-testenv=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync
}

start_apiserver() {
  spawn kube-apiserver "$K8S_BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" \
    --tls-private-key-file "$PKI/apiserver.key" \
    --secure-port "$APISERVER_PORT" \
    --bind-address 127.0.0.1 \
    --advertise-address 127.0.0.1 \
    --service-cluster-ip-range 10.0.0.0/24 \
    --allow-privileged=true \
    --authorization-mode RBAC \
    --client-ca-file "$PKI/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$PKI/sa.pub" \
    --service-account-signing-key-file "$PKI/sa.key" \
    --disable-admission-plugins ServiceAccount
}

start_pdns() {
  local dir=$STATE/pdns
  mkdir -p "$dir"
  local backend
  case ${PDNS_BACKEND:-sqlite} in
    sqlite)
      sqlite3 "$dir/pdns.sqlite3" </usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql
      # WAL: readers do not block the writer; parallel suites otherwise hit "database is
      # locked". No fsync (synchronous=0): 2-4x faster writes, shorter write locks.
      backend="launch=gsqlite3
gsqlite3-database=$dir/pdns.sqlite3
gsqlite3-pragma-journal-mode=WAL
gsqlite3-pragma-synchronous=0"
      ;;
    lmdb)
      # One writer at a time, queued (never "database is locked"); nosync: no fsync.
      backend="launch=lmdb
lmdb-filename=$dir/pdns.lmdb
lmdb-sync-mode=nosync"
      ;;
  esac
  cat >"$dir/pdns.conf" <<EOF
$backend
api=yes
api-key=$PDNS_API_KEY
webserver=yes
webserver-address=127.0.0.1
webserver-port=$PDNS_WEB_PORT
webserver-allow-from=127.0.0.1
local-address=127.0.0.1
local-port=$PDNS_DNS_PORT
guardian=no
daemon=no
socket-dir=$dir
disable-syslog=yes
loglevel=4
# stay on loopback: no security-status lookups, no NOTIFYs or queries leaving 127.0.0.0/8
security-poll-suffix=
query-local-address=127.0.0.1
only-notify=127.0.0.0/8
EOF
  spawn pdns /usr/sbin/pdns_server --config-dir="$dir"
}

start_registry() {
  local dir=$STATE/registry
  mkdir -p "$dir/data"
  cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: info
  fields:
    service: registry
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$REGISTRY_PORT
EOF
  spawn registry /usr/bin/docker-registry serve "$dir/config.yml"
}

# A second registry that requires a user (htpasswd, bcrypt): pull-secret and docker-config tests.
start_registry_auth() {
  local dir=$STATE/registry-auth
  mkdir -p "$dir/data"
  htpasswd -Bbn "$REGISTRY_AUTH_USER" "$REGISTRY_AUTH_PASSWORD" >"$dir/htpasswd"
  cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: info
  fields:
    service: registry-auth
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
auth:
  htpasswd:
    realm: orchard-testenv
    path: $dir/htpasswd
http:
  addr: 127.0.0.1:$REGISTRY_AUTH_PORT
EOF
  spawn registry-auth /usr/bin/docker-registry serve "$dir/config.yml"
}

# The collector: OTLP/HTTP on loopback in, OTLP JSON lines out. No processors, so no batching
# delay: a request is in the exporter when its 200 is sent. Rotation stays off (one file to read);
# without rotation the file exporter writes through a buffer flushed every flush_interval and never
# on an export, so the interval is short (10 ms, a near-idle ticker) instead of its 1 s default. A
# reader may still see a last line that is not complete yet: it should read complete lines only.
# gRPC is not configured (one port fewer), nor the collector's own metrics, whose default is a
# fixed port 8888 that a second env (the demo's) would collide on.
start_otelcol() {
  local dir=$STATE/otel
  mkdir -p "$dir"
  : >"$dir/traces.jsonl" # there from the start, so a reader can open it before the first span
  cat >"$dir/config.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$OTLP_HTTP_PORT
exporters:
  file:
    path: $dir/traces.jsonl
    format: json
    append: true
    flush_interval: 10ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
EOF
  spawn otelcol "$OTELCOL_BIN" --config "$dir/config.yaml"
}

# Environment shared by rabbitmq-server and rabbitmqctl: a node of our own with every file under
# the state dir, its own epmd on a free loopback port, and distribution bound to 127.0.0.1.
rabbitmq_env() {
  local dir=$STATE/rabbitmq
  export HOME=$dir/home # the Erlang cookie lives here, shared by server and CLI
  export RABBITMQ_NODENAME=orchard@localhost
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  export RABBITMQ_NODE_PORT=$RABBITMQ_AMQP_PORT
  export RABBITMQ_DIST_PORT=$RABBITMQ_DIST_PORT
  export RABBITMQ_CONFIG_FILE=$dir/rabbitmq.conf
  export RABBITMQ_ADVANCED_CONFIG_FILE=$dir/advanced.config
  export RABBITMQ_CONF_ENV_FILE=$dir/rabbitmq-env.conf
  export RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins
  export RABBITMQ_MNESIA_BASE=$dir/mnesia
  export RABBITMQ_PID_FILE=$dir/rabbitmq.pid
  export RABBITMQ_LOG_BASE=$LOGS
  export RABBITMQ_LOGS=$LOGS/rabbitmq-server.log
  export ERL_EPMD_ADDRESS=127.0.0.1
  export ERL_EPMD_PORT=$RABBITMQ_EPMD_PORT
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}"
  export RABBITMQ_CTL_ERL_ARGS="-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}"
  export RABBITMQ_CTL_DIST_PORT_MIN=$RABBITMQ_CTL_DIST_PORT
  export RABBITMQ_CTL_DIST_PORT_MAX=$RABBITMQ_CTL_DIST_PORT
}

start_rabbitmq() {
  local dir=$STATE/rabbitmq
  mkdir -p "$dir/home" "$dir/mnesia"
  : >"$dir/rabbitmq-env.conf"
  echo '[rabbitmq_management].' >"$dir/enabled_plugins"
  cat >"$dir/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$RABBITMQ_AMQP_PORT
management.tcp.ip = 127.0.0.1
management.tcp.port = $RABBITMQ_MGMT_PORT
management.ssl.ip = 127.0.0.1
management.ssl.port = $RABBITMQ_MGMT_TLS_PORT
management.ssl.cacertfile = $PKI/ca.crt
management.ssl.certfile = $PKI/rabbitmq.crt
management.ssl.keyfile = $PKI/rabbitmq.key
EOF
  (
    rabbitmq_env
    spawn epmd /usr/bin/epmd -address 127.0.0.1 -port "$RABBITMQ_EPMD_PORT"
    cd "$dir"
    spawn rabbitmq /usr/lib/rabbitmq/bin/rabbitmq-server
  )
}

rabbitmqctl() { ( rabbitmq_env; cd "$STATE/rabbitmq"; /usr/lib/rabbitmq/bin/rabbitmqctl "$@" ); }

setup_rabbitmq_user() {
  rabbitmqctl add_user "$RABBITMQ_USER" "$RABBITMQ_PASSWORD" >/dev/null
  rabbitmqctl set_user_tags "$RABBITMQ_USER" administrator >/dev/null
  rabbitmqctl set_permissions -p / "$RABBITMQ_USER" '.*' '.*' '.*' >/dev/null
}

write_env_file() {
  local tmp=$ENV_FILE.tmp
  {
    echo "# Written by tests/env/testenv.sh up; sourceable KEY=value lines (see docs/testing.md)."
    echo "ORCHARD_TESTENV_DIR=$STATE"
    echo "KUBECONFIG=$STATE/admin.kubeconfig"
    echo "ORCHARD_ADMIN_KUBECONFIG=$STATE/admin.kubeconfig"
    echo "ORCHARD_UNPRIVILEGED_KUBECONFIG=$STATE/unprivileged.kubeconfig"
    echo "ORCHARD_APISERVER_URL=https://127.0.0.1:$APISERVER_PORT"
    echo "ORCHARD_K8S_VERSION=$K8S_VERSION"
    echo "PDNS_API_URL=http://127.0.0.1:$PDNS_WEB_PORT"
    echo "PDNS_API_KEY=$PDNS_API_KEY"
    echo "PDNS_DNS_PORT=$PDNS_DNS_PORT"
    echo "ORCHARD_REGISTRY=127.0.0.1:$REGISTRY_PORT"
    echo "ORCHARD_REGISTRY_DATA=$STATE/registry/data"
    echo "ORCHARD_AUTH_REGISTRY=127.0.0.1:$REGISTRY_AUTH_PORT"
    echo "ORCHARD_AUTH_REGISTRY_USER=$REGISTRY_AUTH_USER"
    echo "ORCHARD_AUTH_REGISTRY_PASSWORD=$REGISTRY_AUTH_PASSWORD"
    if [ "$WANT_RABBITMQ" = 1 ]; then
      echo "RABBITMQ_API_URL=http://127.0.0.1:$RABBITMQ_MGMT_PORT"
      echo "RABBITMQ_API_TLS_URL=https://127.0.0.1:$RABBITMQ_MGMT_TLS_PORT"
      echo "RABBITMQ_AMQP_PORT=$RABBITMQ_AMQP_PORT"
      echo "RABBITMQ_USER=$RABBITMQ_USER"
      echo "RABBITMQ_PASSWORD=$RABBITMQ_PASSWORD"
    fi
    echo "ORCHARD_OTLP_ENDPOINT=http://127.0.0.1:$OTLP_HTTP_PORT"
    echo "ORCHARD_OTLP_TRACES_FILE=$STATE/otel/traces.jsonl"
    echo "ORCHARD_TESTENV_CA=$PKI/ca.crt"
    echo "ORCHARD_TESTENV_LOGS=$LOGS"
  } >"$tmp"
  mv "$tmp" "$ENV_FILE"
}

write_internal() {
  local tmp=$INTERNAL.tmp
  {
    for v in K8S_BIN ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT PDNS_WEB_PORT PDNS_DNS_PORT \
      PDNS_API_KEY PDNS_BACKEND REGISTRY_PORT REGISTRY_AUTH_PORT REGISTRY_AUTH_USER \
      REGISTRY_AUTH_PASSWORD WANT_RABBITMQ OTELCOL_BIN OTLP_HTTP_PORT; do
      echo "$v=${!v}"
    done
    if [ "$WANT_RABBITMQ" = 1 ]; then
      for v in RABBITMQ_AMQP_PORT RABBITMQ_MGMT_PORT RABBITMQ_MGMT_TLS_PORT RABBITMQ_DIST_PORT \
        RABBITMQ_EPMD_PORT RABBITMQ_CTL_DIST_PORT RABBITMQ_USER RABBITMQ_PASSWORD; do
        echo "$v=${!v}"
      done
    fi
  } >"$tmp"
  mv "$tmp" "$INTERNAL"
}

# --------------------------------------------------------------------------------------------
# commands

cmd_up() {
  WANT_RABBITMQ=${ORCHARD_TESTENV_RABBITMQ:-1}
  PDNS_BACKEND=${ORCHARD_TESTENV_PDNS_BACKEND:-sqlite}
  case $PDNS_BACKEND in
    sqlite | lmdb) ;;
    *) die "ORCHARD_TESTENV_PDNS_BACKEND=$PDNS_BACKEND: expected sqlite or lmdb" ;;
  esac
  while [ $# -gt 0 ]; do
    case $1 in
      --with-rabbitmq) WANT_RABBITMQ=1 ;;
      --without-rabbitmq) WANT_RABBITMQ=0 ;;
      *) die "unknown option for up: $1" ;;
    esac
    shift
  done

  if is_up_and_healthy "$WANT_RABBITMQ"; then
    echo "$ENV_FILE"
    return 0
  fi

  # A previous env (partial, dead or unhealthy): stop what we started and start from scratch.
  stop_all
  K8S_BIN=$("$SCRIPT_DIR/build-k8s.sh") || die "building kube-apiserver/etcd failed"
  [ -x "$K8S_BIN/kube-apiserver" ] && [ -x "$K8S_BIN/etcd" ] || die "build-k8s.sh gave no binaries in $K8S_BIN"
  OTELCOL_BIN=$("$SCRIPT_DIR/build-otelcol.sh") || die "building the OpenTelemetry Collector failed"
  [ -x "$OTELCOL_BIN" ] || die "build-otelcol.sh gave no binary at $OTELCOL_BIN"

  mkdir -p "$STATE"
  if [ -d "$LOGS" ]; then rm -rf "$STATE/logs.previous"; mv "$LOGS" "$STATE/logs.previous"; fi
  rm -rf "$ENV_FILE" "$INTERNAL" "$PKI" "$PIDS" "$STATE/etcd" "$STATE/pdns" \
    "$STATE/registry" "$STATE/registry-auth" "$STATE/rabbitmq" "$STATE/otel" "$STATE"/*.kubeconfig
  mkdir -p "$PIDS" "$LOGS"

  read -r ETCD_CLIENT_PORT ETCD_PEER_PORT APISERVER_PORT PDNS_WEB_PORT PDNS_DNS_PORT REGISTRY_PORT \
    RABBITMQ_AMQP_PORT RABBITMQ_MGMT_PORT RABBITMQ_DIST_PORT RABBITMQ_EPMD_PORT RABBITMQ_CTL_DIST_PORT \
    REGISTRY_AUTH_PORT RABBITMQ_MGMT_TLS_PORT OTLP_HTTP_PORT < <(free_ports 14)
  PDNS_API_KEY=$(random_token)
  RABBITMQ_USER=orchard
  RABBITMQ_PASSWORD=$(random_token)
  REGISTRY_AUTH_USER=orchard
  REGISTRY_AUTH_PASSWORD=$(random_token)

  # If anything below fails, stop what was started (logs stay) so the next `up` starts clean.
  trap 'rc=$?; if [ "$rc" != 0 ]; then log "up failed; stopping what was started (logs in $LOGS)"; stop_all; fi' EXIT

  make_pki
  start_etcd
  start_pdns
  start_registry
  start_registry_auth
  start_otelcol
  if [ "$WANT_RABBITMQ" = 1 ]; then start_rabbitmq; fi
  write_internal

  wait_healthy etcd check_etcd
  start_apiserver
  wait_healthy pdns check_pdns
  wait_healthy registry check_registry
  wait_healthy registry-auth check_registry_auth
  wait_healthy otelcol check_otelcol
  wait_healthy kube-apiserver check_apiserver
  write_kubeconfig "$STATE/admin.kubeconfig" admin
  write_kubeconfig "$STATE/unprivileged.kubeconfig" unprivileged
  if [ "$WANT_RABBITMQ" = 1 ]; then
    wait_healthy rabbitmq check_rabbitmq_guest "$LOGS/rabbitmq-server.log"
    setup_rabbitmq_user
    wait_healthy rabbitmq check_rabbitmq "$LOGS/rabbitmq-server.log"
  fi
  write_env_file
  trap - EXIT
  echo "$ENV_FILE"
}

cmd_down() {
  stop_all
  rm -f "$ENV_FILE"
  log "down (logs kept in $LOGS)"
}

cmd_status() {
  if [ ! -d "$PIDS" ] || [ -z "$(services)" ]; then
    echo "testenv: not running (state dir $STATE)"
    return 0
  fi
  load_internal || true
  local name pid health
  for name in $(services); do
    pid=$(recorded_pid "$name")
    if recorded_alive "$name"; then
      case $name in
        etcd) check_etcd 2>/dev/null && health=healthy || health=unhealthy ;;
        kube-apiserver) check_apiserver 2>/dev/null && health=healthy || health=unhealthy ;;
        pdns) check_pdns 2>/dev/null && health=healthy || health=unhealthy ;;
        registry) check_registry 2>/dev/null && health=healthy || health=unhealthy ;;
        registry-auth) check_registry_auth 2>/dev/null && health=healthy || health=unhealthy ;;
        rabbitmq) check_rabbitmq 2>/dev/null && health=healthy || health=unhealthy ;;
        otelcol) check_otelcol 2>/dev/null && health=healthy || health=unhealthy ;;
        *) health=running ;;
      esac
      printf '%-15s pid %-8s %s\n' "$name" "$pid" "$health"
    else
      printf '%-15s pid %-8s %s\n' "$name" "$pid" "NOT RUNNING"
    fi
  done
  if [ -f "$ENV_FILE" ]; then echo "env file: $ENV_FILE"; else echo "env file: (missing)"; fi
  echo "logs:     $LOGS"
}

cmd_env() {
  [ -f "$ENV_FILE" ] || die "no env file at $ENV_FILE; run tests/env/testenv.sh up"
  echo "$ENV_FILE"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  stop-pdns) # stop PowerDNS alone (outage scenarios); start-pdns brings it back with its data
    load_internal
    stop_group pdns ;;
  start-pdns)
    load_internal
    recorded_alive pdns || spawn pdns /usr/sbin/pdns_server --config-dir="$STATE/pdns"
    wait_healthy pdns check_pdns ;;
  stop-apiserver) # stop kube-apiserver alone (watch-recovery scenarios); etcd keeps the data
    load_internal
    stop_group kube-apiserver ;;
  start-apiserver)
    load_internal
    recorded_alive kube-apiserver || start_apiserver
    wait_healthy kube-apiserver check_apiserver ;;
  rabbitmqctl) # run rabbitmqctl against the env's node (it needs the node's cookie and epmd port)
    shift
    [ -f "$PIDS/rabbitmq.pid" ] || die "RabbitMQ is not running in $STATE"
    load_internal
    rabbitmqctl "$@" ;;
  *) echo "usage: $0 up [--with-rabbitmq|--without-rabbitmq] | down | status | env | stop-pdns | start-pdns | stop-apiserver | start-apiserver | rabbitmqctl ARGS..." >&2; exit 2 ;;
esac
