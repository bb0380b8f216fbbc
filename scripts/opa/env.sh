# shellcheck shell=bash
# Sourced by scripts/opa-crosscheck and scripts/bench-gate.
#
# opa_python: print the path of a Python that can `import opa_bindings` — PyPI
# opa-golib-python-bindings, which embeds the real OPA Go library (github.com/open-policy-agent/opa
# v1) as a c-shared library. Installs it into a venv on first use (the wheel declares Python >= 3.14
# but works on 3.11, hence --ignore-requires-python). Returns non-zero, with pip's output on
# stderr, if that is impossible.
#
# The venv lives in $KUBEMEDIC_OPA_VENV, else $KUBEMEDIC_TEST_STATE/opa-venv, else
# .test-state/opa-venv in the repository.

OPA_BINDINGS_VERSION=0.4.4

opa_python() {
  local repo venv python
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  venv=${KUBEMEDIC_OPA_VENV:-${KUBEMEDIC_TEST_STATE:-$repo/.test-state}/opa-venv}
  python="$venv/bin/python"
  if [ -x "$python" ] && "$python" - "$OPA_BINDINGS_VERSION" >/dev/null 2>&1 <<'PY'
import sys, importlib.metadata, opa_bindings
sys.exit(importlib.metadata.version("opa-golib-python-bindings") != sys.argv[1])
PY
  then
    echo "$python"
    return 0
  fi
  echo "[opa] installing opa-golib-python-bindings==$OPA_BINDINGS_VERSION into $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2 || return 1
  "$python" -m pip install --quiet --disable-pip-version-check --ignore-requires-python \
    "opa-golib-python-bindings==$OPA_BINDINGS_VERSION" >&2 || return 1
  "$python" -c 'import opa_bindings' >&2 || return 1
  echo "$python"
}
