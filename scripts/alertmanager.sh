#!/usr/bin/env bash
# A throwaway Prometheus Alertmanager for the test tier.
#
#   scripts/alertmanager.sh start STATE_DIR   start on a free 127.0.0.1 port, write STATE_DIR/env
#   scripts/alertmanager.sh stop  STATE_DIR   stop it (idempotent)
#
# STATE_DIR/env exports KUBEMEDIC_TEST_ALERTMANAGER_URL. Tests post alerts to its
# /api/v2/alerts and read them back; it notifies nobody (one receiver without configs), runs
# alone (no cluster peer port) and keeps its state under STATE_DIR. Debian's
# prometheus-alertmanager is used; it is installed if missing.
set -euo pipefail

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
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
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
  for _ in $(seq 1 150); do
    if curl -fsS "$url/-/ready" >/dev/null 2>&1; then
      printf 'export KUBEMEDIC_TEST_ALERTMANAGER_URL=%q\n' "$url" >"$dir/env"
      echo "alertmanager: $url"
      exit 0
    fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      tail -n 30 "$dir/server.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "alertmanager.sh: not ready after 30 s" >&2
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
  echo "usage: alertmanager.sh start|stop STATE_DIR" >&2
  exit 2
  ;;
esac
