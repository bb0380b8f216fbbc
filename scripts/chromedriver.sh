#!/usr/bin/env bash
# Debian's chromedriver driving Debian's headless Chromium, for the browser tests of the web pages.
#
#   scripts/chromedriver.sh start STATE_DIR   start chromedriver on a free 127.0.0.1 port, write STATE_DIR/env
#   scripts/chromedriver.sh stop  STATE_DIR   stop it and the browsers it started (idempotent)
#
# STATE_DIR/env exports:
#   KUBEMEDIC_TEST_WEBDRIVER   http://127.0.0.1:PORT, the WebDriver endpoint (plain HTTP, loopback only)
#   KUBEMEDIC_TEST_CHROMIUM    the Chromium binary for the sessions' goog:chromeOptions.binary
# Ready when GET /status says `"ready": true` and one headless session could be opened and closed
# (so a Chromium that cannot start fails here, not in the first test). The binary is the real
# one, /usr/lib/chromium/chromium, not Debian's /usr/bin/chromium launcher, which adds its own
# flags (extensions, GPU rasterization) and Google API keys from /etc/chromium.d (ADR 0013).
# chromium and chromium-driver are installed from Debian if missing (scripts/setup.sh does too).
set -euo pipefail
# shellcheck source=lib/service.sh
source "$(dirname "$0")/lib/service.sh"

cmd=${1:?usage: chromedriver.sh start|stop STATE_DIR}
dir=${2:?usage: chromedriver.sh start|stop STATE_DIR}
driver=/usr/bin/chromedriver
chromium=/usr/lib/chromium/chromium

# ready URL : chromedriver answers /status with ready=true.
ready() {
  curl -fsS "$1/status" | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["value"]["ready"] else 1)'
}

# probe URL : open one headless session with the binary and close it again.
probe() {
  local url=$1 caps id
  caps=$(python3 -c 'import json,sys; print(json.dumps({"capabilities": {"alwaysMatch": {
    "browserName": "chrome",
    "goog:chromeOptions": {"binary": sys.argv[1], "args": ["--headless=new", "--no-sandbox",
      "--disable-gpu", "--disable-dev-shm-usage", "--user-data-dir=" + sys.argv[2]]}}}}))' \
    "$chromium" "$dir/probe-profile")
  id=$(curl -fsS -X POST -H 'content-type: application/json' --data "$caps" "$url/session" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["value"]["sessionId"])') || {
    echo "chromedriver: a headless Chromium session could not be opened" >&2
    tail -n 30 "$dir/server.log" >&2
    return 1
  }
  curl -fsS -X DELETE "$url/session/$id" >/dev/null
  rm -rf "$dir/probe-profile"
}

case "$cmd" in
start)
  if [ ! -x "$driver" ] || [ ! -x "$chromium" ]; then
    echo "chromedriver.sh: installing Debian's chromium and chromium-driver" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      chromium chromium-driver >/dev/null
  fi
  "$0" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
  mkdir -p "$dir"
  port=$(free_port)
  url="http://127.0.0.1:$port"
  # Loopback only (chromedriver's default allow-list is local addresses); INFO logs every
  # command, which is what one reads after a failed browser test.
  nohup "$driver" --port="$port" --log-level=INFO >"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  wait_ready chromedriver "$dir" "$url" KUBEMEDIC_TEST_WEBDRIVER ready "$url"
  if ! probe "$url"; then
    stop_service "$dir"
    rm -f "$dir/env"
    exit 1
  fi
  printf 'export %s=%q\n' KUBEMEDIC_TEST_CHROMIUM "$chromium" >>"$dir/env"
  echo "chromedriver: $("$driver" --version | cut -d' ' -f1-2), $("$chromium" --version 2>/dev/null)"
  ;;
stop)
  # chromedriver leaves the browsers of sessions still open (a test run killed half-way)
  # running when it is terminated: end them too, each browser taking its helpers with it.
  browsers=""
  [ -f "$dir/pid" ] && browsers=$(pgrep -P "$(cat "$dir/pid")" || true)
  stop_service "$dir"
  for pid in $browsers; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in $browsers; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  ;;
*)
  echo "usage: chromedriver.sh start|stop STATE_DIR" >&2
  exit 2
  ;;
esac
