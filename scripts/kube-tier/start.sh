#!/usr/bin/env bash
# Start a throw-away, real Kubernetes 1.20.2 control plane for kubemedic's tests:
# etcd + kube-apiserver + kube-controller-manager, all on 127.0.0.1, free ports.
#
# Usage: start.sh STATE_DIR
#
# KUBEMEDIC_KUBE_FOR_NODES=1 makes a control plane that real kubelets can join (node.sh):
# the Node authorizer and NodeRestriction admission beside RBAC, and a client certificate
# (O=system:masters) the apiserver presents to kubelets for logs, exec and port-forward,
# checking their serving certificates against the tier's CA. Without it, tests' fake kubelets
# serve logs over plain TLS the apiserver does not verify.
#
# Every start gives a fresh, empty cluster (the etcd data, certificates, tokens
# and logs under STATE_DIR are re-created). No scheduler, no kubelet: pods stay
# Pending unless a test binds them and patches their status.
#
# Writes into STATE_DIR:
#   admin.kubeconfig   token user `admin` (group system:masters)
#   reader.kubeconfig  token user `kubemedic-reader` (no RBAC bindings; tests bind it)
#   nobody.kubeconfig  token user `nobody` (no permissions)
#   env                `export` lines, see below; `source STATE_DIR/env`
#   logs/*.log, pids/*.pid, pki/, etcd-data/
# Stop with: stop.sh STATE_DIR
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=./common.sh source-path=SCRIPTDIR
source "$SCRIPT_DIR/common.sh"

[[ $# -eq 1 ]] || die "usage: $0 STATE_DIR"
mkdir -p "$1"
STATE_DIR="$(cd "$1" && pwd)"

READY_TIMEOUT="${KUBEMEDIC_KUBE_READY_TIMEOUT:-90}"  # seconds until /readyz must be ok
SA_TIMEOUT="${KUBEMEDIC_KUBE_SA_TIMEOUT:-60}"        # seconds until default/default SA + token exist
CONTEXT=kubemedic-test
SERVICE_CIDR=10.0.0.0/24

T_START=$SECONDS
PKI="$STATE_DIR/pki"
LOGS="$STATE_DIR/logs"
PIDS="$STATE_DIR/pids"

# Refuse to clobber a running cluster.
for pidfile in "$PIDS"/*.pid; do
    [[ -f "$pidfile" ]] || continue
    pid=$(cat "$pidfile")
    if [[ -n "$pid" ]] && grep -aqsF "$STATE_DIR/" "/proc/$pid/cmdline"; then
        die "a cluster is already running from $STATE_DIR (pid $pid); run stop.sh $STATE_DIR first"
    fi
done

# --------------------------------------------------------------------------
ensure_apt_packages etcd-server openssl curl python3
kube_binaries_cached || "$SCRIPT_DIR/build.sh"
kube_binaries_cached || die "kube binaries missing after build.sh"

rm -rf "$PKI" "$LOGS" "$PIDS" "$STATE_DIR/etcd-data" "$STATE_DIR"/*.kubeconfig "$STATE_DIR/env"
mkdir -p "$PKI" "$LOGS" "$PIDS"
chmod 700 "$PKI"

# --------------------------------------------------------------------------
# Certificates and keys (openssl). CA -> apiserver serving cert (SAN
# 127.0.0.1/localhost + the in-cluster names); RSA key pair for service-account tokens.
log "generating CA, serving certificate and service-account keys"
# A control plane for real nodes listens on the machine's own address too (pods reach it there,
# through the `kubernetes` Service kube-proxy routes), and says so in its endpoints.
BIND_ADDRESS=127.0.0.1
ADVERTISE_ADDRESS=127.0.0.1
EXTRA_SAN=""
if [[ "${KUBEMEDIC_KUBE_FOR_NODES:-}" == 1 ]]; then
    ADVERTISE_ADDRESS=$(ip -4 route get 192.0.2.255 2>/dev/null |
        awk '{for (i = 1; i < NF; i++) if ($i == "src") { print $(i + 1); exit }}')
    [[ -n "$ADVERTISE_ADDRESS" ]] || die "no IPv4 address for the node tier's apiserver"
    BIND_ADDRESS=0.0.0.0
    EXTRA_SAN=",IP:$ADVERTISE_ADDRESS"
fi
(
    cd "$PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -sha256 \
        -keyout ca.key -out ca.crt -subj "/CN=kubemedic-test-ca" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
        -subj "/CN=kube-apiserver" 2>/dev/null
    cat >apiserver.ext <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local$EXTRA_SAN
EOF
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days 3650 -sha256 -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    if [[ "${KUBEMEDIC_KUBE_FOR_NODES:-}" == 1 ]]; then
        openssl req -newkey rsa:2048 -nodes -keyout apiserver-kubelet-client.key \
            -out apiserver-kubelet-client.csr \
            -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
        printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
            >client.ext
        openssl x509 -req -in apiserver-kubelet-client.csr -CA ca.crt -CAkey ca.key \
            -CAcreateserial -days 3650 -sha256 -extfile client.ext \
            -out apiserver-kubelet-client.crt 2>/dev/null
    fi
    chmod 600 ./*.key
)
NODE_FLAGS=(--authorization-mode RBAC)
if [[ "${KUBEMEDIC_KUBE_FOR_NODES:-}" == 1 ]]; then
    NODE_FLAGS=(
        --authorization-mode Node,RBAC
        --enable-admission-plugins NodeRestriction
        --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt"
        --kubelet-client-key "$PKI/apiserver-kubelet-client.key"
        --kubelet-certificate-authority "$PKI/ca.crt"
        --kubelet-preferred-address-types InternalIP
    )
fi

# Static bearer tokens: token,user,uid[,"groups"]
ADMIN_TOKEN=$(openssl rand -hex 24)
READER_TOKEN=$(openssl rand -hex 24)
NOBODY_TOKEN=$(openssl rand -hex 24)
CM_TOKEN=$(openssl rand -hex 24)
cat >"$PKI/tokens.csv" <<EOF
$ADMIN_TOKEN,admin,admin,"system:masters"
$READER_TOKEN,kubemedic-reader,kubemedic-reader
$NOBODY_TOKEN,nobody,nobody
$CM_TOKEN,kubemedic-controller-manager,kubemedic-controller-manager,"system:masters"
EOF
chmod 600 "$PKI/tokens.csv"

# --------------------------------------------------------------------------
# Free ports on 127.0.0.1 (asked from the kernel; tiny race until the servers bind them).
free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# start_bg NAME CMD... : start CMD detached (own session), log and pid in STATE_DIR.
start_bg() {
    local name="$1"
    shift
    setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
    echo $! >"$PIDS/$name.pid"
}

alive() { kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null; }

fail() {
    local name="$1"
    shift
    log "ERROR: $*"
    log "---- last 40 lines of $LOGS/$name.log ----"
    tail -n 40 "$LOGS/$name.log" >&2 || true
    "$SCRIPT_DIR/stop.sh" "$STATE_DIR" >&2 || true
    exit 1
}

port_in_use() { grep -qs "address already in use" "$LOGS/$1.log"; }

CURL=(curl -sS --max-time 3 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN")

# --------------------------------------------------------------------------
# etcd + kube-apiserver. Retried (with new ports) if a port was grabbed by
# someone else between choosing and binding it.
for attempt in 1 2 3; do
    read -r ETCD_PORT ETCD_PEER_PORT API_PORT < <(free_ports 3)
    SERVER="https://127.0.0.1:$API_PORT"
    log "attempt $attempt: etcd on 127.0.0.1:$ETCD_PORT, kube-apiserver on $SERVER"
    rm -rf "$STATE_DIR/etcd-data"

    start_bg etcd etcd \
        --name kubemedic \
        --data-dir "$STATE_DIR/etcd-data" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "kubemedic=http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster-state new \
        --logger zap --log-outputs stderr

    start_bg kube-apiserver "$KUBE_APISERVER_BIN" \
        --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
        --bind-address "$BIND_ADDRESS" \
        --advertise-address "$ADVERTISE_ADDRESS" \
        --secure-port "$API_PORT" \
        --cert-dir "$PKI/apiserver-generated" \
        --tls-cert-file "$PKI/apiserver.crt" \
        --tls-private-key-file "$PKI/apiserver.key" \
        --client-ca-file "$PKI/ca.crt" \
        --token-auth-file "$PKI/tokens.csv" \
        "${NODE_FLAGS[@]}" \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$PKI/sa.pub" \
        --service-account-signing-key-file "$PKI/sa.key" \
        --service-cluster-ip-range "$SERVICE_CIDR" \
        --allow-privileged=true \
        --profiling=false

    # Wait for /readyz.
    ready=""
    deadline=$((SECONDS + READY_TIMEOUT))
    while ((SECONDS < deadline)); do
        if [[ "$("${CURL[@]}" "$SERVER/readyz" 2>/dev/null || true)" == "ok" ]]; then
            ready=yes
            break
        fi
        if ! alive etcd || ! alive kube-apiserver; then
            break
        fi
        sleep 0.5
    done
    [[ -n "$ready" ]] && break

    if { port_in_use etcd || port_in_use kube-apiserver; } && ((attempt < 3)); then
        log "a port was taken meanwhile; retrying with new ports"
        "$SCRIPT_DIR/stop.sh" "$STATE_DIR" >&2
        mkdir -p "$PIDS"
        continue
    fi
    if ! alive etcd; then
        fail etcd "etcd exited"
    fi
    "${CURL[@]}" "$SERVER/readyz?verbose" >&2 || true
    fail kube-apiserver "kube-apiserver not ready after $READY_TIMEOUT s (or it exited)"
done
log "kube-apiserver ready at $SERVER after $((SECONDS - T_START)) s"

# --------------------------------------------------------------------------
# kubeconfigs
CA_DATA=$(base64 -w0 "$PKI/ca.crt")
write_kubeconfig() { # FILE USER TOKEN
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $CONTEXT
  cluster:
    server: $SERVER
    certificate-authority-data: $CA_DATA
users:
- name: $2
  user:
    token: $3
contexts:
- name: $CONTEXT
  context:
    cluster: $CONTEXT
    user: $2
    namespace: default
current-context: $CONTEXT
preferences: {}
EOF
    chmod 600 "$1"
}
write_kubeconfig "$STATE_DIR/admin.kubeconfig" admin "$ADMIN_TOKEN"
write_kubeconfig "$STATE_DIR/reader.kubeconfig" kubemedic-reader "$READER_TOKEN"
write_kubeconfig "$STATE_DIR/nobody.kubeconfig" nobody "$NOBODY_TOKEN"
write_kubeconfig "$PKI/controller-manager.kubeconfig" kubemedic-controller-manager "$CM_TOKEN"

# --------------------------------------------------------------------------
# kube-controller-manager: no HTTP(S) listener at all (--port 0 --secure-port 0).
# No node lifecycle controller (fake nodes would be evicted) and no HPA controller (there is
# no metrics API): tests play both, as they play the kubelet.
# KUBEMEDIC_KUBE_CM_QPS raises its client's rate (default 20 requests a second, bursts of 30),
# for a bench that has it make thousands of pods (scripts/bench-storm).
CM_RATE=()
if [[ -n "${KUBEMEDIC_KUBE_CM_QPS:-}" ]]; then
    CM_RATE=(--kube-api-qps "$KUBEMEDIC_KUBE_CM_QPS" --kube-api-burst "$((KUBEMEDIC_KUBE_CM_QPS * 2))")
fi
start_bg kube-controller-manager "$KUBE_CONTROLLER_MANAGER_BIN" \
    --kubeconfig "$PKI/controller-manager.kubeconfig" \
    --leader-elect=false \
    --controllers '*,-nodelifecycle,-horizontalpodautoscaling' \
    --service-account-private-key-file "$PKI/sa.key" \
    --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" \
    --cluster-signing-key-file "$PKI/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --bind-address 127.0.0.1 \
    --port 0 \
    --secure-port 0 \
    --cert-dir "$PKI/controller-manager-generated" \
    "${CM_RATE[@]}" \
    --profiling=false

# Proof the controller-manager works: the serviceaccount controller creates
# default/default and the token controller gives it a token secret (which the
# ServiceAccount admission plugin of 1.20 needs before pods can be created).
deadline=$((SECONDS + SA_TIMEOUT))
while :; do
    sa=$("${CURL[@]}" "$SERVER/api/v1/namespaces/default/serviceaccounts/default" 2>/dev/null || true)
    if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d.get("kind")=="ServiceAccount" and d.get("secrets") else 1)' "$sa" 2>/dev/null; then
        break
    fi
    alive kube-controller-manager || fail kube-controller-manager "kube-controller-manager exited"
    ((SECONDS < deadline)) || fail kube-controller-manager "no default/default ServiceAccount with a token after $SA_TIMEOUT s"
    sleep 0.5
done
log "kube-controller-manager created default/default ServiceAccount"

# --------------------------------------------------------------------------
cat >"$STATE_DIR/env" <<EOF
# Generated by scripts/kube-tier/start.sh; source this file.
export KUBEMEDIC_TEST_KUBECONFIG='$STATE_DIR/admin.kubeconfig'
export KUBEMEDIC_TEST_READER_KUBECONFIG='$STATE_DIR/reader.kubeconfig'
export KUBEMEDIC_TEST_NOBODY_KUBECONFIG='$STATE_DIR/nobody.kubeconfig'
export KUBEMEDIC_TEST_KUBE_SERVER='$SERVER'
export KUBEMEDIC_TEST_KUBE_CA_FILE='$PKI/ca.crt'
export KUBEMEDIC_TEST_KUBE_ADMIN_TOKEN='$ADMIN_TOKEN'
export KUBEMEDIC_TEST_KUBE_READER_TOKEN='$READER_TOKEN'
export KUBEMEDIC_TEST_KUBE_NOBODY_TOKEN='$NOBODY_TOKEN'
EOF

log "Kubernetes $KUBE_VERSION test control plane up at $SERVER in $((SECONDS - T_START)) s"
log "  source $STATE_DIR/env   (stop: $SCRIPT_DIR/stop.sh $STATE_DIR)"
