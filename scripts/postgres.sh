#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test tier and benchmarks.
#
#   scripts/postgres.sh start STATE_DIR   initdb + start on a free 127.0.0.1 port, write STATE_DIR/env
#   scripts/postgres.sh resume STATE_DIR  start the cluster STATE_DIR already holds, data kept (a
#                                         fresh one if there is none), on a new free port
#   scripts/postgres.sh stop  STATE_DIR   stop it (idempotent)
#
# STATE_DIR/env exports KUBEMEDIC_TEST_POSTGRES_URL (superuser, database `postgres`); tests
# create a fresh database per test from it. Debian's server binaries are used; they are
# installed if missing. initdb refuses to run as root, so the server runs as `postgres`.
set -euo pipefail

cmd=${1:?usage: postgres.sh start|resume|stop STATE_DIR}
dir=${2:?usage: postgres.sh start|resume|stop STATE_DIR}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
start | resume)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "postgres.sh: installing Debian's postgresql server" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
  fi
  "$0" stop "$dir" >/dev/null 2>&1 || true
  if [ "$cmd" = start ] || [ ! -f "$dir/data/PG_VERSION" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    as_pg "$bin/initdb" -D "$dir/data" --auth=trust -U postgres -E UTF8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=on" start >/dev/null \
    || { tail -n 30 "$dir/server.log" >&2; exit 1; }
  url="postgres://postgres@127.0.0.1:$port/postgres"
  printf 'export KUBEMEDIC_TEST_POSTGRES_URL=%q\n' "$url" >"$dir/env"
  echo "postgres: $url"
  ;;
stop)
  if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
  fi
  ;;
*)
  echo "usage: postgres.sh start|resume|stop STATE_DIR" >&2
  exit 2
  ;;
esac
