#!/usr/bin/env bash
# Build a real kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy
# (Kubernetes 1.20.2) from Debian bookworm's `kubernetes` source package, for
# kubemedic's test tiers (start.sh: the control plane; node.sh: a real node).
#
# Result: ${KUBEMEDIC_CACHE_DIR:-$HOME/.cache/kubemedic}/kube-1.20.2/bin/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy}
#
# - A fast no-op when all five binaries are already cached.
# - Installs missing build dependencies with apt-get (golang-go, rsync, make, ...).
# - Downloads the source with a *private* apt configuration (the system's
#   apt sources are not modified), patches the vendored reflect2 for Go >= 1.18,
#   runs `make gen_openapi`, then builds both commands in GOPATH mode.
# - Safe to re-run after a failed or interrupted build: binaries are only
#   moved into bin/ once complete; the downloaded source is kept and re-used.
# - After a successful build the build tree and Go build cache are deleted
#   (they take several GB); only bin/ and the 34 MB source download are kept.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=./common.sh source-path=SCRIPTDIR
source "$SCRIPT_DIR/common.sh"

if kube_binaries_cached; then
    log "kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy $KUBE_VERSION already cached in $KUBE_BIN_DIR (nothing to do)"
    exit 0
fi

T_START=$SECONDS
step_start() { STEP_NAME="$1"; STEP_T0=$SECONDS; log "==> $STEP_NAME"; }
step_end() { log "<== $STEP_NAME done in $((SECONDS - STEP_T0)) s"; }

DOWNLOAD_DIR="$KUBE_CACHE_DIR/source-download" # kept: Debian source package files
APT_DIR="$KUBE_CACHE_DIR/apt"                   # private apt config/state for the download
BUILD_DIR="$KUBE_CACHE_DIR/build"               # deleted after a successful build
GOPATH_DIR="$BUILD_DIR/gopath"
SRC_DIR="$GOPATH_DIR/src/k8s.io/kubernetes"
GO_BUILD_CACHE="$BUILD_DIR/go-build-cache"

mkdir -p "$KUBE_BIN_DIR"

# --------------------------------------------------------------------------
step_start "build dependencies (apt)"
ensure_apt_packages golang-go rsync make golang-github-modern-go-reflect2-dev \
    dpkg-dev ca-certificates
step_end

# --------------------------------------------------------------------------
# Find the Debian mirror the system already uses (deb822 or one-line format),
# so the deb-src entry points at the same place.
debian_mirror() {
    if [[ -n "${KUBEMEDIC_DEBIAN_MIRROR:-}" ]]; then
        echo "$KUBEMEDIC_DEBIAN_MIRROR"
        return
    fi
    local f url=""
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" ]] || continue
        url=$(awk 'BEGIN { RS = ""; FS = "\n" }
            {
                uris = ""; suites = ""; types = ""
                for (i = 1; i <= NF; i++) {
                    line = $i
                    if (line ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", line);   uris = line }
                    if (line ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", line); suites = " " line " " }
                    if (line ~ /^Types:/)  { types = line }
                }
                if (types ~ /deb/ && suites ~ / bookworm /) { split(uris, u, /[ \t]+/); print u[1]; exit }
            }' "$f")
        [[ -n "$url" ]] && break
    done
    if [[ -z "$url" ]]; then
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [[ -f "$f" ]] || continue
            url=$(sed -E 's/\[[^]]*\]//' "$f" |
                awk '$1 ~ /^deb(-src)?$/ && $3 == "bookworm" { print $2; exit }')
            [[ -n "$url" ]] && break
        done
    fi
    echo "${url:-http://deb.debian.org/debian}"
}

# --------------------------------------------------------------------------
step_start "download Debian source package 'kubernetes'"
if [[ -f "$DOWNLOAD_DIR/.complete" ]]; then
    log "source already downloaded in $DOWNLOAD_DIR"
else
    MIRROR="$(debian_mirror)"
    log "using Debian mirror $MIRROR (deb-src, private apt config in $APT_DIR)"
    rm -rf "$APT_DIR" "$DOWNLOAD_DIR"
    mkdir -p "$APT_DIR/sources" "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$DOWNLOAD_DIR"
    KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
    {
        echo "Types: deb-src"
        echo "URIs: $MIRROR"
        echo "Suites: bookworm"
        echo "Components: main"
        [[ -f "$KEYRING" ]] && echo "Signed-By: $KEYRING"
    } >"$APT_DIR/sources/kubemedic-src.sources"
    APT_OPTS=(
        -o Dir::Etc::SourceList=/dev/null
        -o Dir::Etc::SourceParts="$APT_DIR/sources"
        -o Dir::State::Lists="$APT_DIR/lists"
        -o Dir::Cache="$APT_DIR/cache"
        -o APT::Sandbox::User=root
    )
    apt-get "${APT_OPTS[@]}" update -q
    (cd "$DOWNLOAD_DIR" && apt-get "${APT_OPTS[@]}" source --download-only kubernetes)
    DSC=$(ls "$DOWNLOAD_DIR"/kubernetes_*.dsc)
    grep -q "^Version: .*1\.20\.2" "$DSC" || die "unexpected kubernetes source version in $DSC (want 1.20.2)"
    touch "$DOWNLOAD_DIR/.complete"
    rm -rf "$APT_DIR"
fi
ls -l "$DOWNLOAD_DIR" >&2
step_end

# --------------------------------------------------------------------------
step_start "unpack and patch source tree"
if [[ -f "$BUILD_DIR/.unpacked" ]]; then
    log "re-using unpacked tree $SRC_DIR"
else
    rm -rf "$BUILD_DIR"
    mkdir -p "$(dirname "$SRC_DIR")"
    DSC=$(ls "$DOWNLOAD_DIR"/kubernetes_*.dsc)
    dpkg-source --no-check -x "$DSC" "$SRC_DIR" >&2

    # The vendored github.com/modern-go/reflect2 1.0.1 crashes with Go >= 1.18;
    # replace its sources with Debian's 1.0.2.
    REFLECT2_VENDOR="$SRC_DIR/vendor/github.com/modern-go/reflect2"
    REFLECT2_DEBIAN=/usr/share/gocode/src/github.com/modern-go/reflect2
    [[ -d "$REFLECT2_VENDOR" ]] || die "vendored reflect2 not found at $REFLECT2_VENDOR"
    rm -f "$REFLECT2_VENDOR"/*.go "$REFLECT2_VENDOR"/*.s
    cp "$REFLECT2_DEBIAN"/*.go "$REFLECT2_DEBIAN"/*.s "$REFLECT2_VENDOR"/
    log "patched vendored reflect2 with Debian's $(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev)"
    touch "$BUILD_DIR/.unpacked"
fi
step_end

export GOPATH="$GOPATH_DIR"
export GO111MODULE=off
export GOCACHE="$GO_BUILD_CACHE"
export GOFLAGS=""
# Go's temporary work dir inside the build tree, so an interrupted build
# leaves nothing behind in /tmp.
export GOTMPDIR="$BUILD_DIR/tmp"
rm -rf "$GOTMPDIR"
mkdir -p "$GOTMPDIR"
export CGO_ENABLED=0
log "$(go version)"

# --------------------------------------------------------------------------
step_start "make gen_openapi"
(cd "$SRC_DIR" && make gen_openapi) >&2
[[ -f "$SRC_DIR/pkg/generated/openapi/zz_generated.openapi.go" ]] ||
    die "make gen_openapi did not produce pkg/generated/openapi/zz_generated.openapi.go"
step_end

# --------------------------------------------------------------------------
# Version information reported by /version (normally injected by hack/lib/version.sh).
LDFLAGS="-s -w"
for pkg in k8s.io/kubernetes/vendor/k8s.io/component-base/version \
    k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
    LDFLAGS+=" -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=20"
    LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done

build_cmd() {
    local name="$1"
    step_start "go build cmd/$name"
    (cd "$SRC_DIR" && go build -trimpath -ldflags "$LDFLAGS" -o "$KUBE_BIN_DIR/.$name.partial" "k8s.io/kubernetes/cmd/$name")
    mv -f "$KUBE_BIN_DIR/.$name.partial" "$KUBE_BIN_DIR/$name"
    step_end
}
[[ -x "$KUBE_APISERVER_BIN" ]] || build_cmd kube-apiserver
[[ -x "$KUBE_CONTROLLER_MANAGER_BIN" ]] || build_cmd kube-controller-manager
# The node tier's two, after the control plane's: they share most packages with it.
[[ -x "$KUBE_SCHEDULER_BIN" ]] || build_cmd kube-scheduler
[[ -x "$KUBELET_BIN" ]] || build_cmd kubelet
[[ -x "$KUBE_PROXY_BIN" ]] || build_cmd kube-proxy

"$KUBE_APISERVER_BIN" --version >&2
"$KUBE_CONTROLLER_MANAGER_BIN" --version >&2
"$KUBE_SCHEDULER_BIN" --version >&2
"$KUBELET_BIN" --version >&2
"$KUBE_PROXY_BIN" --version >&2

# --------------------------------------------------------------------------
step_start "remove build tree"
rm -rf "$BUILD_DIR" 2>/dev/null || { chmod -R u+w "$BUILD_DIR" && rm -rf "$BUILD_DIR"; }
step_end

log "build finished in $((SECONDS - T_START)) s; binaries in $KUBE_BIN_DIR"
du -sh "$KUBE_CACHE_DIR" >&2
