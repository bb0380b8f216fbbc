#!/usr/bin/env bash
# A throwaway Prometheus server for the test tier.
#
#   scripts/prometheus.sh start STATE_DIR   start on a free 127.0.0.1 port, write STATE_DIR/env
#   scripts/prometheus.sh stop  STATE_DIR   stop it (idempotent)
#
# STATE_DIR/env exports KUBEMEDIC_TEST_PROMETHEUS_URL. It scrapes itself every second (job
# `prometheus`) and `start` returns once that first scrape is in, so `up` and its own metrics
# have data; its TSDB lives under STATE_DIR. Debian's prometheus is used; it is installed if missing.
set -euo pipefail

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
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
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
  for _ in $(seq 1 150); do
    # Ready, and its first scrape of itself is in: queries have data.
    if curl -fsS "$url/-/ready" >/dev/null 2>&1 &&
      curl -fsS "$url/api/v1/query?query=up" 2>/dev/null | grep -q '"job"'; then
      printf 'export KUBEMEDIC_TEST_PROMETHEUS_URL=%q\n' "$url" >"$dir/env"
      echo "prometheus: $url"
      exit 0
    fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      tail -n 30 "$dir/server.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "prometheus.sh: not ready after 30 s" >&2
  tail -n 30 "$dir/server.log" >&2
  "$0" stop "$dir" || true
  exit 1
  ;;
stop)
  if [ -f "$dir/pid" ]; then
    pid=$(cat "$dir/pid")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
  fi
  ;;
*)
  echo "usage: prometheus.sh start|stop STATE_DIR" >&2
  exit 2
  ;;
esac
