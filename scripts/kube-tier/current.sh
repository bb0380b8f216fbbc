#!/usr/bin/env bash
# Start (or stop) a current Kubernetes CRD server beside the kube tier: etcd and the
# apiextensions-apiserver that build-current.sh makes from Debian unstable. It serves
# CustomResourceDefinitions and custom resources with the current release's validation, so the
# chart's CRDs can be dry-run against the oldest Kubernetes the chart supports (the kube tier's
# 1.20) and a current one.
#
# Usage: current.sh start STATE_DIR KUBE_STATE_DIR
#        current.sh stop STATE_DIR
#
# Authentication and authorisation are delegated to the kube tier's API server (TokenReview and
# SubjectAccessReview, as an aggregated API server does), so the kube tier's tokens work here.
# Admission plugins and API priority and fairness are off: they watch kinds the 1.20 server does
# not serve, and none of them takes part in validating a CRD or a custom resource's schema.
# Writes STATE_DIR/env: KUBEMEDIC_TEST_CRD_SERVER (URL; the kube tier's CA and admin token
# apply) and KUBEMEDIC_TEST_CRD_SERVER_VERSION.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=./common.sh source-path=SCRIPTDIR
source "$SCRIPT_DIR/common.sh"

BIN="$KUBE_CACHE_ROOT/kube-current/bin"
usage() { die "usage: $0 start STATE_DIR KUBE_STATE_DIR | stop STATE_DIR"; }
[[ $# -ge 2 ]] || usage
mkdir -p "$2"
STATE_DIR="$(cd "$2" && pwd)"
PIDS="$STATE_DIR/pids"
LOGS="$STATE_DIR/logs"

ours() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null && grep -aqsF "$STATE_DIR/" "/proc/$1/cmdline"; }
stop_all() {
    local name pid i
    for name in apiextensions-apiserver etcd; do
        [[ -f "$PIDS/$name.pid" ]] || continue
        pid=$(cat "$PIDS/$name.pid")
        if ours "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
            for ((i = 0; i < 100; i++)); do
                ours "$pid" || break
                sleep 0.1
            done
            ours "$pid" && kill -KILL "$pid" 2>/dev/null
        fi
        rm -f "$PIDS/$name.pid"
    done
}

case "$1" in
stop)
    stop_all
    log "current CRD server stopped"
    exit 0
    ;;
start) [[ $# -eq 3 ]] || usage ;;
*) usage ;;
esac

KUBE_STATE="$(cd "$3" && pwd)"
[[ -f "$KUBE_STATE/admin.kubeconfig" ]] || die "the kube tier is not running from $KUBE_STATE (no admin.kubeconfig)"
"$SCRIPT_DIR/build-current.sh"
stop_all
rm -rf "$LOGS" "$STATE_DIR/etcd-data" "$STATE_DIR/certs" "$STATE_DIR/env"
mkdir -p "$PIDS" "$LOGS"

read -r ETCD_PORT ETCD_PEER_PORT API_PORT < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
)

setsid "$BIN/etcd" --name current --data-dir "$STATE_DIR/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "current=http://127.0.0.1:$ETCD_PEER_PORT" \
    --logger zap --log-outputs stderr >"$LOGS/etcd.log" 2>&1 </dev/null &
echo $! >"$PIDS/etcd.pid"

KUBECONFIG_FILE="$KUBE_STATE/admin.kubeconfig"
setsid "$BIN/apiextensions-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --secure-port "$API_PORT" \
    --cert-dir "$STATE_DIR/certs" \
    --tls-cert-file "$KUBE_STATE/pki/apiserver.crt" --tls-private-key-file "$KUBE_STATE/pki/apiserver.key" \
    --kubeconfig "$KUBECONFIG_FILE" \
    --authentication-kubeconfig "$KUBECONFIG_FILE" \
    --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --disable-admission-plugins NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionPolicy \
    --enable-priority-and-fairness=false \
    --profiling=false >"$LOGS/apiextensions-apiserver.log" 2>&1 </dev/null &
echo $! >"$PIDS/apiextensions-apiserver.pid"

SERVER="https://127.0.0.1:$API_PORT"
TOKEN=$(awk -F, '$2 == "admin" {print $1}' "$KUBE_STATE/pki/tokens.csv")
deadline=$((SECONDS + ${KUBEMEDIC_KUBE_READY_TIMEOUT:-90}))
until [[ "$(curl -sS --max-time 3 --cacert "$KUBE_STATE/pki/ca.crt" -H "Authorization: Bearer $TOKEN" \
    "$SERVER/readyz" 2>/dev/null || true)" == ok ]]; do
    # Alive is enough here: until the forked shell has exec'd the server, its command line is
    # this script's, which `ours` does not recognise (a race on a busy machine).
    if ((SECONDS > deadline)) || ! kill -0 "$(cat "$PIDS/apiextensions-apiserver.pid")" 2>/dev/null; then
        tail -n 30 "$LOGS/apiextensions-apiserver.log" >&2
        stop_all
        die "the current CRD server did not become ready"
    fi
    sleep 0.5
done
VERSION=$(curl -sS --cacert "$KUBE_STATE/pki/ca.crt" -H "Authorization: Bearer $TOKEN" "$SERVER/version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin).get("gitVersion", ""))')
VERSION=${VERSION:-$(head -n1 "$KUBE_CACHE_ROOT/kube-current/VERSIONS")}
cat >"$STATE_DIR/env" <<EOF
export KUBEMEDIC_TEST_CRD_SERVER=$SERVER
export KUBEMEDIC_TEST_CRD_SERVER_VERSION='$VERSION'
EOF
log "current CRD server ($VERSION) ready at $SERVER"
