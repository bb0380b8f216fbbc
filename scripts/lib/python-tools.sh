# shellcheck shell=bash
# Python packages the test tier runs (the official OpenAI client, aiosmtpd, later the MCP SDK), each set
# installed once from PyPI into its own virtual environment in the cache, keyed by the pinned
# versions. Source it; it defines functions only.
#
#   py_tool NAME PACKAGE==VERSION...   prints the venv folder (installs first if needed: ~20 s;
#                                      instant when already there); its python is bin/python

PY_TOOLS_ROOT="${KUBEMEDIC_CACHE_DIR:-$HOME/.cache/kubemedic}/venv"

# The OpenAI Python client the chat endpoint is tested with (tests/chat.rs).
OPENAI_PACKAGES=(openai==3.57.0)

# A real SMTP server that offers (and requires) STARTTLS, for tests/notify.rs
# (tests/smtp/starttls_server.py); maildev only speaks plain SMTP and implicit TLS.
SMTP_PACKAGES=(aiosmtpd==1.4.6)

# The official MCP Python SDK, the client tests/mcp.rs drives the MCP server with.
MCP_PACKAGES=(mcp==2.3.0)

# The OpenTelemetry protocol's definitions, which the OTLP/HTTP receiver of tests/traces.rs
# (tests/otlp/receiver.py) parses the daemon's spans with.
OTLP_PACKAGES=(opentelemetry-proto==1.45.2 protobuf==7.36.2)

py_tool() {
  local name=$1
  shift
  local key dir tmp
  key=$(printf '%s\n' "$@" | sha256sum | cut -c1-12)
  dir="$PY_TOOLS_ROOT/$name-$key"
  if [ -f "$dir/.installed" ]; then
    echo "$dir"
    return 0
  fi
  mkdir -p "$PY_TOOLS_ROOT"
  # Built in a private folder and renamed, as npm_tool does; a venv records its own path, so
  # it is created at its final name and only marked installed once pip succeeded.
  tmp="$dir"
  rm -rf "$tmp"
  echo "python-tools: installing $* into $dir" >&2
  if ! python3 -m venv "$tmp" >&2 ||
    ! "$tmp/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2; then
    rm -rf "$tmp"
    echo "python-tools: pip install $* failed" >&2
    return 1
  fi
  printf '%s\n' "$@" >"$tmp/.installed"
  echo "$dir"
}
