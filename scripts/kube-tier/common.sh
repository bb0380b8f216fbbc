# shellcheck shell=bash
# Shared helpers for the kube-tier scripts (sourced, not executed).
#
# Defines the cache layout and a few small helpers used by build.sh,
# start.sh and stop.sh.

KUBE_VERSION="1.20.2"
KUBE_CACHE_ROOT="${KUBEMEDIC_CACHE_DIR:-$HOME/.cache/kubemedic}"
KUBE_CACHE_DIR="$KUBE_CACHE_ROOT/kube-$KUBE_VERSION"
KUBE_BIN_DIR="$KUBE_CACHE_DIR/bin"
KUBE_APISERVER_BIN="$KUBE_BIN_DIR/kube-apiserver"
KUBE_CONTROLLER_MANAGER_BIN="$KUBE_BIN_DIR/kube-controller-manager"
# The node tier's (node.sh): built in the same GOPATH and Go cache, about 90 s more.
KUBELET_BIN="$KUBE_BIN_DIR/kubelet"
KUBE_SCHEDULER_BIN="$KUBE_BIN_DIR/kube-scheduler"
KUBE_PROXY_BIN="$KUBE_BIN_DIR/kube-proxy"

log() { printf '[kube-tier %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

kube_binaries_cached() {
    [[ -x "$KUBE_APISERVER_BIN" && -x "$KUBE_CONTROLLER_MANAGER_BIN" &&
        -x "$KUBELET_BIN" && -x "$KUBE_SCHEDULER_BIN" && -x "$KUBE_PROXY_BIN" ]]
}

# ensure_apt_packages PKG... : install the Debian packages that are not
# installed yet (does nothing, quickly, when all are present).
ensure_apt_packages() {
    local missing=() pkg
    for pkg in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
            missing+=("$pkg")
        fi
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    log "installing Debian packages: ${missing[*]}"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
        log "apt-get install failed; running apt-get update and retrying"
        "${sudo[@]}" apt-get update -q
        "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
    fi
}
