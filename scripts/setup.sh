#!/usr/bin/env bash
# Install what the test tiers and benchmarks need on a fresh Debian machine of this kind, only
# what is missing, from Debian's packages (and PyPI/npm for the rest). Idempotent and quick when
# everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=kube-tier/common.sh
source scripts/kube-tier/common.sh

# PostgreSQL server binaries, etcd, openssl/curl for the kube tier; Alertmanager and Prometheus
# for verification (Debian's packages do not start services in a container: policy-rc.d).
ensure_apt_packages postgresql etcd-server openssl curl python3 python3-venv \
  prometheus-alertmanager prometheus
