#!/usr/bin/env bash
# Throwaway SMTP servers with an HTTP API to read the mail back (npm maildev), for the test tier.
#
#   scripts/maildev.sh start STATE_DIR   start two servers on free 127.0.0.1 ports, write STATE_DIR/env
#   scripts/maildev.sh stop  STATE_DIR   stop them (idempotent)
#
# STATE_DIR/env exports:
#   KUBEMEDIC_TEST_SMTP_URL         smtp://127.0.0.1:PORT, plain SMTP that requires AUTH with
#   KUBEMEDIC_TEST_SMTP_USERNAME    these credentials (a wrong password is refused with 535)
#   KUBEMEDIC_TEST_SMTP_PASSWORD
#   KUBEMEDIC_TEST_MAILDEV_API      its HTTP API: GET /email lists the mail received (JSON),
#                                   GET /email/ID/source the raw message
#   KUBEMEDIC_TEST_SMTPS_URL        smtps://127.0.0.1:PORT, implicit TLS, no AUTH, with a
#   KUBEMEDIC_TEST_SMTPS_CA_FILE    certificate for 127.0.0.1 signed by this throwaway CA (PEM)
#   KUBEMEDIC_TEST_MAILDEV_TLS_API  that server's HTTP API
# Each is ready when its API and its SMTP port answer. maildev is installed from npm into ~/.cache/kubemedic/npm once (scripts/lib/npm-tools.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/service.sh
source "$here/lib/service.sh"
# shellcheck source=lib/npm-tools.sh
source "$here/lib/npm-tools.sh"

cmd=${1:?usage: maildev.sh start|stop STATE_DIR}
dir=${2:?usage: maildev.sh start|stop STATE_DIR}

# start_one SUBDIR SMTP_PORT WEB_PORT MAILDEV_ARGS... : one maildev, ready when both its web
# API and its SMTP port answer.
start_one() {
  local sub=$1 smtp=$2 web=$3
  shift 3
  mkdir -p "$sub/mail"
  nohup node --require "$dir/keepalive.js" "$tool/node_modules/maildev/bin/maildev" --smtp "$smtp" --web "$web" --ip 127.0.0.1 \
    --mail-directory "$sub/mail" "$@" >"$sub/server.log" 2>&1 </dev/null &
  echo $! >"$sub/pid"
  wait_ready "maildev ($(basename "$sub"))" "$sub" "http://127.0.0.1:$web" UNUSED \
    bash -c "curl -fsS http://127.0.0.1:$web/email >/dev/null && exec 3<>/dev/tcp/127.0.0.1/$smtp"
}

case "$cmd" in
start)
  tool=$(npm_tool maildev "${MAILDEV_PACKAGES[@]}")
  "$0" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
  mkdir -p "$dir/plain" "$dir/tls"

  ports=()
  while [ ${#ports[@]} -lt 4 ]; do
    p=$(free_port)
    case " ${ports[*]} " in *" $p "*) ;; *) ports+=("$p") ;; esac
  done
  # maildev rethrows any SMTP socket error it does not know (a client that hangs up before
  # the TLS handshake ends, a client refusing the certificate) and dies of it; a test of such
  # a client must not take the server down for the others.
  cat >"$dir/keepalive.js" <<'JS'
process.on('uncaughtException', (err) => {
  console.error('maildev: kept running after an uncaught error:', err && err.message);
});
JS
  password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')

  # A CA and a certificate for 127.0.0.1 / localhost signed by it, for the TLS server.
  (
    cd "$dir/tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
      -subj /CN=kubemedic-test-smtp-ca -keyout ca.key -out ca.pem \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -subj /CN=localhost -keyout server.key -out server.csr 2>/dev/null
    printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'basicConstraints=CA:FALSE' \
      'keyUsage=critical,digitalSignature' 'extendedKeyUsage=serverAuth' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile server.ext -out server.pem 2>/dev/null
  )

  start_one "$dir/plain" "${ports[0]}" "${ports[1]}" \
    --incoming-user kubemedic --incoming-pass "$password"
  start_one "$dir/tls" "${ports[2]}" "${ports[3]}" \
    --incoming-secure --incoming-cert "$dir/tls/server.pem" --incoming-key "$dir/tls/server.key"

  {
    printf 'export %s=%q\n' \
      KUBEMEDIC_TEST_SMTP_URL "smtp://127.0.0.1:${ports[0]}" \
      KUBEMEDIC_TEST_SMTP_USERNAME kubemedic \
      KUBEMEDIC_TEST_SMTP_PASSWORD "$password" \
      KUBEMEDIC_TEST_MAILDEV_API "http://127.0.0.1:${ports[1]}" \
      KUBEMEDIC_TEST_SMTPS_URL "smtps://127.0.0.1:${ports[2]}" \
      KUBEMEDIC_TEST_SMTPS_CA_FILE "$dir/tls/ca.pem" \
      KUBEMEDIC_TEST_MAILDEV_TLS_API "http://127.0.0.1:${ports[3]}"
  } >"$dir/env"
  echo "maildev: smtp://127.0.0.1:${ports[0]} (API :${ports[1]}), smtps://127.0.0.1:${ports[2]} (API :${ports[3]})"
  ;;
stop)
  stop_service "$dir/plain"
  stop_service "$dir/tls"
  ;;
*)
  echo "usage: maildev.sh start|stop STATE_DIR" >&2
  exit 2
  ;;
esac
