"""A real SMTP server that requires STARTTLS (PyPI aiosmtpd), for tests/notify.rs.

    python starttls_server.py CERT.pem KEY.pem

Listens on a free 127.0.0.1 port and prints `READY <port>` once it accepts connections. Each
mail it receives is printed as one JSON line `{"tls": bool, "from": ..., "to": [...],
"data": ...}`; every command refused for coming before the TLS handshake (MAIL, RCPT, DATA,
AUTH: aiosmtpd answers 530) is printed as `{"clear": "530 ..."}`, so the test can see that the
client tried nothing in clear. Runs until
stdin closes (the test ends).
"""

import json
import socket
import ssl
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP


def say(obj):
    print(json.dumps(obj), flush=True)


class Recorder:
    async def handle_DATA(self, server, session, envelope):
        say(
            {
                "tls": session.ssl is not None,
                "from": envelope.mail_from,
                "to": envelope.rcpt_tos,
                "data": envelope.content.decode("utf-8", "replace"),
            }
        )
        return "250 OK"


class Watched(SMTP):
    """aiosmtpd's SMTP, noting each command it refused for coming before the TLS handshake."""

    async def push(self, status):
        if status.startswith("530") and "STARTTLS" in status:
            say({"clear": status})
        return await super().push(status)


class WatchedController(Controller):
    def factory(self):
        return Watched(self.handler, **self.SMTP_kwargs)


def main():
    cert, key = sys.argv[1], sys.argv[2]
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = WatchedController(
        Recorder(),
        hostname="127.0.0.1",
        port=port,
        tls_context=context,
        require_starttls=True,
        auth_require_tls=True,
    )
    controller.start()
    print(f"READY {port}", flush=True)
    try:
        sys.stdin.read()
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
