#!/usr/bin/env bash
# Stop the control plane started by start.sh STATE_DIR (kube-controller-manager,
# kube-apiserver, etcd — in that order). Uses the pid files in STATE_DIR/pids:
# SIGTERM, then SIGKILL after a grace period. Idempotent; only signals a pid
# whose command line still refers to STATE_DIR (guards against pid reuse).
#
# Usage: stop.sh STATE_DIR
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=./common.sh source-path=SCRIPTDIR
source "$SCRIPT_DIR/common.sh"

[[ $# -eq 1 ]] || die "usage: $0 STATE_DIR"
if [[ ! -d "$1" ]]; then
    log "nothing to stop: $1 does not exist"
    exit 0
fi
STATE_DIR="$(cd "$1" && pwd)"
PIDS="$STATE_DIR/pids"
GRACE="${KUBEMEDIC_KUBE_STOP_GRACE:-10}" # seconds between TERM and KILL

ours() { # PID: is it alive and one of ours?
    [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null && grep -aqsF "$STATE_DIR/" "/proc/$1/cmdline"
}

stop_one() {
    local name="$1" pidfile="$PIDS/$1.pid" pid i
    [[ -f "$pidfile" ]] || return 0
    pid=$(cat "$pidfile")
    if ours "$pid"; then
        log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < GRACE * 10; i++)); do
            ours "$pid" || break
            sleep 0.1
        done
        if ours "$pid"; then
            log "$name (pid $pid) still running after $GRACE s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                ours "$pid" || break
                sleep 0.1
            done
        fi
    fi
    rm -f "$pidfile"
}

for name in kube-controller-manager kube-apiserver etcd; do
    stop_one "$name"
done
log "stopped (state left in $STATE_DIR)"
