#!/usr/bin/env bash
# A real node for the kube tier: a real kubelet (1.20.2, built from the same Debian source as the
# control plane) running pods with Debian's containerd and runc on a CNI bridge, kube-proxy
# (iptables: Service addresses route, from pods and from this machine), the real
# kube-scheduler, and the node-lifecycle controller (NotReady, taints), joined to a running
# control plane that start.sh made with KUBEMEDIC_KUBE_FOR_NODES=1.
#
# Usage:
#   node.sh start STATE_DIR KUBE_STATE_DIR   start the node; wait until it is Ready; write STATE_DIR/env
#   node.sh stop STATE_DIR                   stop everything, unmount, restore the sysctls, remove
#                                            the bridge and the pod logs
#   node.sh kubelet-stop STATE_DIR           stop only the kubelet (the node goes NotReady)
#   node.sh kubelet-start STATE_DIR          start it again and wait until the node is Ready
#   node.sh images                           only build the cached images
#
# Images are built here, never pulled (nothing can be pulled on these machines), and cached in
# ~/.cache/kubemedic/images: localhost/busybox:1.35 (Debian's busybox-static) and
# localhost/pause:3.2 (the sandbox image, compiled from the source package's build/pause).
# Any other image reference is really unpullable.
#
# Network: pods get addresses on a bridge this script creates (kmbr0, 10.88.0.0/24) with a
# route to the Service range only (no default route); a FORWARD rule drops anything from the
# pod network to elsewhere, and pods get no DNS server from outside (resolv.conf names the
# cluster DNS address, which nothing serves). The kubelet and the control plane listen on the
# machine's own address (pods reach the apiserver there through the `kubernetes` Service); an
# INPUT rule drops what reaches those ports through the machine's outside interface.
#
# STATE_DIR/env exports:
#   KUBEMEDIC_TEST_NODE_KUBECONFIG   the control plane's admin kubeconfig (system:masters)
#   KUBEMEDIC_TEST_NODE_NAME         the node's name (kubemedic-node-1)
#   KUBEMEDIC_TEST_NODE_STATE        STATE_DIR (for kubelet-stop / kubelet-start)
#   KUBEMEDIC_TEST_NODE_CONTAINERD   containerd's socket (ctr -a ... -n k8s.io)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=./common.sh source-path=SCRIPTDIR
source "$SCRIPT_DIR/common.sh"

NODE_NAME=kubemedic-node-1
POD_CIDR=10.88.0.0/24
BRIDGE=kmbr0
CLUSTER_DNS=10.0.0.10
BUSYBOX_IMAGE=localhost/busybox:1.35
PAUSE_IMAGE=localhost/pause:3.2
IMAGE_CACHE="$KUBE_CACHE_ROOT/images"
READY_TIMEOUT="${KUBEMEDIC_NODE_READY_TIMEOUT:-120}"
# The sysctls the kubelet sets for itself (kernel defaults it protects); restored at stop.
SYSCTLS=(kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom kernel.keys.root_maxkeys kernel.keys.root_maxbytes
    net.ipv4.ip_forward net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables)
SERVICE_CIDR=10.0.0.0/24

usage() { die "usage: $0 start STATE_DIR KUBE_STATE_DIR | stop STATE_DIR | kubelet-stop STATE_DIR | kubelet-start STATE_DIR"; }

# --------------------------------------------------------------------------
# Processes (detached, own session; pid files in STATE_DIR/pids).
start_bg() {
    local name="$1"
    shift
    setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
    echo $! >"$PIDS/$name.pid"
}
ours() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null && grep -aqsF "$STATE_DIR/" "/proc/$1/cmdline"; }
alive() { [[ -f "$PIDS/$1.pid" ]] && ours "$(cat "$PIDS/$1.pid")"; }
stop_one() {
    local name="$1" pidfile="$PIDS/$1.pid" pid i
    [[ -f "$pidfile" ]] || return 0
    pid=$(cat "$pidfile")
    if ours "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            ours "$pid" || break
            sleep 0.1
        done
        ours "$pid" && kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            ours "$pid" || break
            sleep 0.1
        done
    fi
    rm -f "$pidfile"
}

fail() {
    local name="$1"
    shift
    log "ERROR: $*"
    if [[ -f "$LOGS/$name.log" ]]; then
        log "---- last 40 lines of $LOGS/$name.log ----"
        tail -n 40 "$LOGS/$name.log" >&2 || true
    fi
    node_stop >&2 || true
    exit 1
}

kubectl_() { kubectl --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# --------------------------------------------------------------------------
# What the kubelet needs of this kernel, checked up front so a missing feature is named.
check_kernel() {
    local missing=()
    [[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || missing+=("the memory cgroup")
    [[ -d /sys/fs/cgroup/cpu || -d /sys/fs/cgroup/cpu,cpuacct || -f /sys/fs/cgroup/cgroup.controllers ]] || missing+=("the cpu cgroup")
    [[ -d /sys/fs/cgroup/pids || -f /sys/fs/cgroup/cgroup.controllers ]] || missing+=("the pids cgroup")
    grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
    grep -qw overlay /proc/filesystems || missing+=("the overlay filesystem (containerd's snapshotter)")
    [[ -e /proc/sys/net/ipv4/ip_forward ]] || missing+=("IPv4 networking sysctls")
    ip link add kmprobe0 type bridge 2>/dev/null && ip link del kmprobe0 || missing+=("bridge network devices (CNI bridge)")
    if ((${#missing[@]})); then
        die "this kernel lacks what a real node needs: ${missing[*]}"
    fi
}

# --------------------------------------------------------------------------
# Images, built once into the cache from Debian's packages.
build_busybox_image() {
    local out="$IMAGE_CACHE/busybox-1.35.tar" work
    [[ -f "$out" ]] && return 0
    log "building $BUSYBOX_IMAGE from Debian's busybox-static"
    work=$(mktemp -d)
    mkdir -p "$work/rootfs/bin" "$work/rootfs/tmp" "$work/rootfs/etc" "$work/rootfs/root"
    chmod 1777 "$work/rootfs/tmp"
    cp /bin/busybox "$work/rootfs/bin/busybox"
    local applet
    for applet in $(/bin/busybox --list); do
        [[ "$applet" == busybox ]] || ln -sf busybox "$work/rootfs/bin/$applet"
    done
    ln -s bin "$work/rootfs/sbin"
    mkdir -p "$work/rootfs/usr"
    ln -s ../bin "$work/rootfs/usr/bin"
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$work/rootfs/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$work/rootfs/etc/group"
    oci_image "$work" busybox 1.35 '["sh"]' "$out"
    rm -rf "$work"
}

build_pause_image() {
    local out="$IMAGE_CACHE/pause-3.2.tar" work src
    [[ -f "$out" ]] && return 0
    log "building $PAUSE_IMAGE from the source package's build/pause/linux/pause.c"
    work=$(mktemp -d)
    src=$(ls "$KUBE_CACHE_DIR"/source-download/kubernetes_*.orig.tar.gz)
    tar -xzf "$src" -C "$work" --wildcards '*build/pause/linux/pause.c'
    mkdir -p "$work/rootfs"
    gcc -Os -Wall -Werror -static -DVERSION=v3.2-kubemedic -o "$work/rootfs/pause" "$(find "$work" -name pause.c | head -n1)"
    oci_image "$work" pause 3.2 '["/pause"]' "$out"
    rm -rf "$work"
}

# oci_image WORK NAME TAG ENTRYPOINT_JSON OUT: WORK/rootfs as a one-layer OCI image archive.
oci_image() {
    local work="$1" name="$2" tag="$3" entry="$4" out="$5"
    umoci init --layout "$work/oci"
    umoci new --image "$work/oci:$tag"
    umoci unpack --rootless --image "$work/oci:$tag" "$work/bundle" >/dev/null
    cp -a "$work/rootfs/." "$work/bundle/rootfs/"
    umoci repack --image "$work/oci:$tag" "$work/bundle"
    local cfg=(--image "$work/oci:$tag" --os linux --architecture amd64 --author kubemedic)
    if [[ "$entry" == '["sh"]' ]]; then
        umoci config "${cfg[@]}" --config.cmd sh --config.env PATH=/bin
    else
        umoci config "${cfg[@]}" --config.entrypoint /pause --config.user 65535:65535
    fi
    umoci gc --layout "$work/oci"
    mkdir -p "$IMAGE_CACHE"
    tar -C "$work/oci" -cf "$out.partial" .
    mv "$out.partial" "$out"
    log "image $name:$tag -> $out"
}

# --------------------------------------------------------------------------
node_ip() {
    # The address of the interface the default route uses (a route lookup: nothing is sent).
    ip -4 route get 192.0.2.255 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") { print $(i + 1); exit }}'
}

write_configs() {
    local ip="$1" kport="$2" hport="$3"
    mkdir -p "$STATE_DIR/containerd/root" "$STATE_DIR/containerd/state" "$STATE_DIR/cni/net.d" \
        "$STATE_DIR/cni/ipam" "$STATE_DIR/kubelet" "$STATE_DIR/pki"
    cat >"$STATE_DIR/containerd/config.toml" <<EOF
version = 2
root = "$STATE_DIR/containerd/root"
state = "$STATE_DIR/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # This VM lacks CAP_SYS_RESOURCE: runc cannot give the sandbox a negative oom_score_adj.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE_DIR/cni/net.d"
EOF
    cat >"$STATE_DIR/cni/net.d/10-kubemedic.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "kubemedic",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "$SERVICE_CIDR"}],
        "dataDir": "$STATE_DIR/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
    printf 'nameserver %s\nsearch svc.cluster.local cluster.local\noptions ndots:5\n' "$CLUSTER_DNS" \
        >"$STATE_DIR/resolv.conf"
    cat >"$STATE_DIR/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: $kport
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $hport
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $KUBE_PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $STATE_DIR/pki/kubelet-serving.crt
tlsPrivateKeyFile: $STATE_DIR/pki/kubelet-serving.key
cgroupDriver: cgroupfs
makeIPTablesUtilChains: false
clusterDNS: [$CLUSTER_DNS]
clusterDomain: cluster.local
resolvConf: $STATE_DIR/resolv.conf
failSwapOn: false
serializeImagePulls: false
# Never collect the images built here: they cannot be pulled back.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute floors, not the default percentages: the node shares a build machine's disk, where
# a few GiB free (1 % of a large disk) is normal while cargo builds, and a disk-pressure taint
# would leave every test pod Pending. Inode checks stay off (evictionHard replaces the defaults).
evictionHard: {memory.available: "100Mi", nodefs.available: "512Mi", imagefs.available: "512Mi"}
maxPods: 60
staticPodPath: ""
EOF
}

make_certs() {
    local ip="$1"
    (
        cd "$STATE_DIR/pki"
        openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr \
            -subj "/O=system:nodes/CN=system:node:$NODE_NAME" 2>/dev/null
        printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >client.ext
        openssl x509 -req -in kubelet-client.csr -CA "$KUBE_PKI/ca.crt" -CAkey "$KUBE_PKI/ca.key" \
            -CAcreateserial -CAserial ca.srl -days 3650 -sha256 -extfile client.ext -out kubelet-client.crt 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout kubelet-serving.key -out kubelet-serving.csr \
            -subj "/O=system:nodes/CN=system:node:$NODE_NAME" 2>/dev/null
        printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:%s,DNS:%s\n' \
            "$ip" "$NODE_NAME" >serving.ext
        openssl x509 -req -in kubelet-serving.csr -CA "$KUBE_PKI/ca.crt" -CAkey "$KUBE_PKI/ca.key" \
            -CAserial ca.srl -days 3650 -sha256 -extfile serving.ext -out kubelet-serving.crt 2>/dev/null
        chmod 600 ./*.key
    )
    cat >"$STATE_DIR/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kubemedic-test
  cluster: {server: $SERVER, certificate-authority: $KUBE_PKI/ca.crt}
users:
- name: $NODE_NAME
  user: {client-certificate: $STATE_DIR/pki/kubelet-client.crt, client-key: $STATE_DIR/pki/kubelet-client.key}
contexts:
- name: kubemedic-test
  context: {cluster: kubemedic-test, user: $NODE_NAME}
current-context: kubemedic-test
EOF
}

start_kubelet() {
    start_bg kubelet "$KUBELET_BIN" \
        --config "$STATE_DIR/kubelet-config.yaml" \
        --kubeconfig "$STATE_DIR/kubelet.kubeconfig" \
        --container-runtime remote \
        --container-runtime-endpoint "unix://$CONTAINERD_SOCK" \
        --hostname-override "$NODE_NAME" \
        --node-ip "$(cat "$STATE_DIR/node-ip")" \
        --root-dir "$STATE_DIR/kubelet" \
        --cert-dir "$STATE_DIR/pki" \
        --node-labels "kubemedic.io/test-node=true" \
        --v 1
}

# wait_ready SECONDS: the node Ready, with no not-ready taint left.
wait_ready() {
    local deadline=$((SECONDS + $1)) out
    while :; do
        out=$(kubectl_ get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}' 2>/dev/null || true)
        if [[ "$out" == True* && "$out" != *not-ready* && "$out" != *unreachable* ]]; then
            return 0
        fi
        alive kubelet || fail kubelet "the kubelet exited"
        ((SECONDS < deadline)) || fail kubelet "node $NODE_NAME not Ready without taints after $1 s (now: $out)"
        sleep 1
    done
}

load_paths() {
    STATE_DIR="$(cd "$1" && pwd)"
    LOGS="$STATE_DIR/logs"
    PIDS="$STATE_DIR/pids"
    CONTAINERD_SOCK="$STATE_DIR/containerd/containerd.sock"
    if [[ -f "$STATE_DIR/kube-state" ]]; then
        KUBE_STATE="$(cat "$STATE_DIR/kube-state")"
        KUBE_PKI="$KUBE_STATE/pki"
        KUBECONFIG_ADMIN="$KUBE_STATE/admin.kubeconfig"
    fi
}

# --------------------------------------------------------------------------
node_start() {
    [[ $# -eq 2 ]] || usage
    mkdir -p "$1"
    [[ -f "$2/env" ]] || die "no running kube tier in $2 (start it with KUBEMEDIC_KUBE_FOR_NODES=1 start.sh $2)"
    [[ -f "$2/pki/apiserver-kubelet-client.crt" ]] ||
        die "the kube tier in $2 was not started for nodes (KUBEMEDIC_KUBE_FOR_NODES=1 start.sh)"
    (cd "$2" && pwd) >"$1/kube-state"
    load_paths "$1"
    if alive kubelet || alive containerd; then
        die "a node is already running from $STATE_DIR; run $0 stop $STATE_DIR first"
    fi
    local t0=$SECONDS
    ensure_apt_packages containerd runc containernetworking-plugins busybox-static iptables umoci \
        iproute2 gcc libc6-dev openssl curl python3 conntrack
    # Debian's kubectl, unless one is installed already (its package would clash).
    command -v kubectl >/dev/null || ensure_apt_packages kubernetes-client
    kube_binaries_cached || "$SCRIPT_DIR/build.sh"
    kube_binaries_cached || die "kube binaries missing after build.sh"
    check_kernel
    build_busybox_image
    build_pause_image

    # shellcheck disable=SC1091
    SERVER=$(source "$KUBE_STATE/env" && echo "$KUBEMEDIC_TEST_KUBE_SERVER")
    rm -rf "$LOGS" "$PIDS" "$STATE_DIR/pki" "$STATE_DIR/cni" "$STATE_DIR/env"
    mkdir -p "$LOGS" "$PIDS"

    local ip kport hport
    ip=$(node_ip)
    [[ -n "$ip" ]] || die "no IPv4 address for the node (no default route interface)"
    echo "$ip" >"$STATE_DIR/node-ip"
    read -r kport hport < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
    write_configs "$ip" "$kport" "$hport"
    make_certs "$ip"

    # The kernel settings the kubelet changes, to put back at stop.
    local k
    : >"$STATE_DIR/sysctls"
    for k in "${SYSCTLS[@]}"; do
        [[ -e "/proc/sys/${k//.//}" ]] && echo "$k=$(sysctl -n "$k")" >>"$STATE_DIR/sysctls"
    done
    # Nothing from the pod network leaves it (the bridge plugin turns on forwarding).
    iptables -C FORWARD -s "$POD_CIDR" ! -d "$POD_CIDR" -j DROP 2>/dev/null ||
        iptables -I FORWARD -s "$POD_CIDR" ! -d "$POD_CIDR" -j DROP
    # The apiserver and the kubelet answer this machine and its pods, not the outside.
    local dev api_port
    dev=$(ip -4 route get 192.0.2.255 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit }}')
    api_port=${SERVER##*:}
    : >"$STATE_DIR/input-rules"
    if [[ -n "$dev" && "$dev" != lo ]]; then
        for port in "$api_port" "$kport"; do
            iptables -I INPUT -i "$dev" -p tcp --dport "$port" -j DROP
            echo "-i $dev -p tcp --dport $port -j DROP" >>"$STATE_DIR/input-rules"
        done
    fi
    # Service traffic between pods on the bridge passes iptables (kube-proxy's rules).
    modprobe br_netfilter 2>/dev/null || true
    sysctl -q -w net.bridge.bridge-nf-call-iptables=1 ||
        die "this kernel lacks br_netfilter (net.bridge.bridge-nf-call-iptables): Service addresses would not route between pods"

    log "containerd (socket $CONTAINERD_SOCK)"
    start_bg containerd containerd --config "$STATE_DIR/containerd/config.toml"
    local deadline=$((SECONDS + 30))
    until ctr -a "$CONTAINERD_SOCK" version >/dev/null 2>&1; do
        alive containerd || fail containerd "containerd exited"
        ((SECONDS < deadline)) || fail containerd "containerd not answering after 30 s"
        sleep 0.3
    done
    ctr -a "$CONTAINERD_SOCK" -n k8s.io images import --base-name localhost/busybox \
        "$IMAGE_CACHE/busybox-1.35.tar" >/dev/null || fail containerd "importing $BUSYBOX_IMAGE failed"
    ctr -a "$CONTAINERD_SOCK" -n k8s.io images import --base-name localhost/pause \
        "$IMAGE_CACHE/pause-3.2.tar" >/dev/null || fail containerd "importing $PAUSE_IMAGE failed"
    ctr -a "$CONTAINERD_SOCK" -n k8s.io images ls -q >&2

    log "kube-scheduler and the node-lifecycle controller"
    start_bg kube-scheduler "$KUBE_SCHEDULER_BIN" \
        --kubeconfig "$KUBECONFIG_ADMIN" \
        --leader-elect=false --port 0 --secure-port 0 \
        --cert-dir "$STATE_DIR/pki/scheduler-generated" \
        --profiling=false
    # Only the controllers the main tier leaves out for its fake Nodes: node lifecycle (NotReady
    # taints and evictions). 20 s without a heartbeat makes a node NotReady (40 s by default).
    start_bg kube-controller-manager-nodes "$KUBE_CONTROLLER_MANAGER_BIN" \
        --kubeconfig "$KUBECONFIG_ADMIN" \
        --leader-elect=false --port 0 --secure-port 0 \
        --controllers nodelifecycle \
        --node-monitor-grace-period 20s \
        --node-monitor-period 2s \
        --profiling=false \
        --cert-dir "$STATE_DIR/pki/cm-generated"

    log "kube-proxy (iptables)"
    local pport mport
    read -r pport mport < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
    # conntrack.maxPerCore 0: leave the kernel's conntrack table as it is.
    cat >"$STATE_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $KUBECONFIG_ADMIN}
hostnameOverride: $NODE_NAME
mode: iptables
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$pport
metricsBindAddress: 127.0.0.1:$mport
conntrack: {maxPerCore: 0}
# Traffic to a Service from outside the pod network (this machine) is masqueraded, so the pod
# answers through the bridge.
clusterCIDR: $POD_CIDR
EOF
    start_bg kube-proxy "$KUBE_PROXY_BIN" --config "$STATE_DIR/kube-proxy.yaml" --v 1
    log "kubelet $NODE_NAME on $ip:$kport"
    start_kubelet
    wait_ready "$READY_TIMEOUT"
    alive kube-scheduler || fail kube-scheduler "kube-scheduler exited"
    alive kube-controller-manager-nodes || fail kube-controller-manager-nodes "the node-lifecycle controller exited"
    alive kube-proxy || fail kube-proxy "kube-proxy exited"
    # kube-proxy has written the `kubernetes` Service's rules once it answers on its address.
    local deadline=$((SECONDS + 30))
    until iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q "default/kubernetes"; do
        alive kube-proxy || fail kube-proxy "kube-proxy exited"
        ((SECONDS < deadline)) || fail kube-proxy "kube-proxy wrote no Service rules in 30 s"
        sleep 0.5
    done

    cat >"$STATE_DIR/env" <<EOF
# Generated by scripts/kube-tier/node.sh; source this file.
export KUBEMEDIC_TEST_NODE_KUBECONFIG='$KUBECONFIG_ADMIN'
export KUBEMEDIC_TEST_NODE_NAME='$NODE_NAME'
export KUBEMEDIC_TEST_NODE_STATE='$STATE_DIR'
export KUBEMEDIC_TEST_NODE_CONTAINERD='$CONTAINERD_SOCK'
EOF
    log "node $NODE_NAME Ready in $((SECONDS - t0)) s (stop: $0 stop $STATE_DIR)"
}

node_stop() {
    stop_one kubelet
    stop_one kube-scheduler
    stop_one kube-controller-manager-nodes
    if [[ -f "$PIDS/kube-proxy.pid" ]]; then
        stop_one kube-proxy
        "$KUBE_PROXY_BIN" --cleanup >/dev/null 2>&1 || true
    fi
    if [[ -f "$STATE_DIR/input-rules" ]]; then
        local rule
        while read -r rule; do
            # shellcheck disable=SC2086
            iptables -D INPUT $rule 2>/dev/null || true
        done <"$STATE_DIR/input-rules"
        rm -f "$STATE_DIR/input-rules"
    fi
    # The pods' containers and sandboxes, then containerd.
    if alive containerd; then
        local c
        for c in $(ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
            ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
        done
        sleep 1
    fi
    stop_one containerd
    # Shims outlive containerd; theirs are ours.
    pkill -KILL -f "containerd-shim-runc-v2 -namespace k8s.io .*-address $CONTAINERD_SOCK" 2>/dev/null || true
    # Mounts the kubelet and containerd made under the state directory (volumes, rootfs).
    local m
    for m in $(awk -v d="$STATE_DIR/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r); do
        umount -l "$m" 2>/dev/null || true
    done
    # Network namespaces the CNI made for the sandboxes are gone with containerd's; the bridge,
    # the forward rule and the address leases are ours.
    ip link del "$BRIDGE" 2>/dev/null || true
    while iptables -D FORWARD -s "$POD_CIDR" ! -d "$POD_CIDR" -j DROP 2>/dev/null; do :; done
    if [[ -f "$STATE_DIR/sysctls" ]]; then
        sysctl -q -p "$STATE_DIR/sysctls" >/dev/null 2>&1 || true
    fi
    # The kubelet's pod cgroups.
    local cg
    for cg in /sys/fs/cgroup/*/kubepods; do
        [[ -d "$cg" ]] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
    rm -rf /var/log/pods /var/log/containers 2>/dev/null || true
    rm -rf "$STATE_DIR/containerd/root" "$STATE_DIR/containerd/state" "$STATE_DIR/kubelet" 2>/dev/null || true
    log "node stopped (logs left in $STATE_DIR/logs)"
}

cmd="${1:-}"
shift || true
case "$cmd" in
start) node_start "$@" ;;
stop)
    [[ $# -eq 1 ]] || usage
    [[ -d "$1" ]] || { log "nothing to stop: $1 does not exist"; exit 0; }
    load_paths "$1"
    node_stop
    ;;
images)
    ensure_apt_packages busybox-static umoci gcc libc6-dev
    build_busybox_image
    build_pause_image
    ;;
kubelet-stop)
    [[ $# -eq 1 ]] || usage
    load_paths "$1"
    stop_one kubelet
    log "kubelet of $NODE_NAME stopped"
    ;;
kubelet-start)
    [[ $# -eq 1 ]] || usage
    load_paths "$1"
    alive kubelet && die "the kubelet is running"
    start_kubelet
    wait_ready "$READY_TIMEOUT"
    log "kubelet of $NODE_NAME started, node Ready"
    ;;
*) usage ;;
esac
