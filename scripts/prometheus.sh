#!/usr/bin/env bash
# A throwaway Prometheus server for the test tier.
#
#   scripts/prometheus.sh start STATE_DIR   start on a free 127.0.0.1 port, write STATE_DIR/env
#   scripts/prometheus.sh stop  STATE_DIR   stop it (idempotent)
#
# STATE_DIR/env exports KUBEMEDIC_TEST_PROMETHEUS_URL and KUBEMEDIC_TEST_PROMETHEUS_BIN (the
# binary, for tests that run their own, e.g. tests/e2e.rs). It scrapes itself every second (job
# `prometheus`) and `start` returns once that first scrape is in, so `up` and its own metrics
# have data; its TSDB lives under STATE_DIR. Debian's prometheus is used; it is installed if missing.
set -euo pipefail
# shellcheck source=lib/service.sh
source "$(dirname "$0")/lib/service.sh"

cmd=${1:?usage: prometheus.sh start|stop STATE_DIR}
dir=${2:?usage: prometheus.sh start|stop STATE_DIR}
bin=/usr/bin/prometheus

case "$cmd" in
start)
  if [ ! -x "$bin" ]; then
    echo "prometheus.sh: installing Debian's prometheus" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      prometheus >/dev/null
  fi
  "$0" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
  mkdir -p "$dir/data"
  port=$(free_port)
  cat >"$dir/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:$port']
YAML
  nohup "$bin" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" \
    >"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  url="http://127.0.0.1:$port"
  # Ready, and its first scrape of itself is in: queries have data.
  ready() { curl -fsS "$url/-/ready" && curl -fsS "$url/api/v1/query?query=up" | grep -q '"job"'; }
  wait_ready prometheus "$dir" "$url" KUBEMEDIC_TEST_PROMETHEUS_URL ready
  # The binary too: end-to-end tests start their own, configured as the test needs.
  printf 'export KUBEMEDIC_TEST_PROMETHEUS_BIN=%q\n' "$bin" >>"$dir/env"
  ;;
stop)
  stop_service "$dir"
  ;;
*)
  echo "usage: prometheus.sh start|stop STATE_DIR" >&2
  exit 2
  ;;
esac
