#!/usr/bin/env bash
# A throwaway Prometheus Alertmanager for the test tier.
#
#   scripts/alertmanager.sh start STATE_DIR   start on a free 127.0.0.1 port, write STATE_DIR/env
#   scripts/alertmanager.sh stop  STATE_DIR   stop it (idempotent)
#
# STATE_DIR/env exports KUBEMEDIC_TEST_ALERTMANAGER_URL and KUBEMEDIC_TEST_ALERTMANAGER_BIN
# (the binary, for tests that run their own, e.g. tests/e2e.rs). Tests post alerts to its
# /api/v2/alerts and read them back; it notifies nobody (one receiver without configs), runs
# alone (no cluster peer port) and keeps its state under STATE_DIR. Debian's
# prometheus-alertmanager is used; it is installed if missing.
set -euo pipefail
# shellcheck source=lib/service.sh
source "$(dirname "$0")/lib/service.sh"

cmd=${1:?usage: alertmanager.sh start|stop STATE_DIR}
dir=${2:?usage: alertmanager.sh start|stop STATE_DIR}
bin=/usr/bin/prometheus-alertmanager

case "$cmd" in
start)
  if [ ! -x "$bin" ]; then
    echo "alertmanager.sh: installing Debian's prometheus-alertmanager" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      prometheus-alertmanager >/dev/null
  fi
  "$0" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
  mkdir -p "$dir/data"
  port=$(free_port)
  cat >"$dir/alertmanager.yml" <<'YAML'
route:
  receiver: nobody
  group_wait: 1s
  group_interval: 5s
receivers:
  - name: nobody
YAML
  nohup "$bin" --config.file="$dir/alertmanager.yml" --storage.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" --cluster.listen-address= \
    >"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  url="http://127.0.0.1:$port"
  wait_ready alertmanager "$dir" "$url" KUBEMEDIC_TEST_ALERTMANAGER_URL curl -fsS "$url/-/ready"
  # The binary too: end-to-end tests start their own, configured as the test needs.
  printf 'export KUBEMEDIC_TEST_ALERTMANAGER_BIN=%q\n' "$bin" >>"$dir/env"
  ;;
stop)
  stop_service "$dir"
  ;;
*)
  echo "usage: alertmanager.sh start|stop STATE_DIR" >&2
  exit 2
  ;;
esac
