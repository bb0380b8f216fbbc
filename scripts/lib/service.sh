# Shared by the throwaway test services (scripts/alertmanager.sh, scripts/prometheus.sh):
# a free port, waiting until the service answers, stopping it. Source it; it defines functions
# only.

# free_port : a free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_ready NAME DIR URL ENV_VAR CHECK... : poll CHECK (a command) for up to 30 s while the
# process in DIR/pid lives; once it succeeds write DIR/env exporting ENV_VAR=URL. On a crash or
# a timeout print the server's log, stop it and return 1.
wait_ready() {
  local name=$1 dir=$2 url=$3 var=$4
  shift 4
  local _
  for _ in $(seq 1 150); do
    if "$@" >/dev/null 2>&1; then
      printf 'export %s=%q\n' "$var" "$url" >"$dir/env"
      echo "$name: $url"
      return 0
    fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      tail -n 30 "$dir/server.log" >&2
      return 1
    fi
    sleep 0.2
  done
  echo "$name: not ready after 30 s" >&2
  tail -n 30 "$dir/server.log" >&2
  stop_service "$dir" || true
  return 1
}

# stop_service DIR : stop the process in DIR/pid (TERM, then KILL after 5 s); idempotent.
stop_service() {
  local dir=$1 pid _
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid"
}
