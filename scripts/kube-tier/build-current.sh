#!/usr/bin/env bash
# Build a current Kubernetes CRD server — the apiextensions-apiserver (the code that serves and
# validates CustomResourceDefinitions inside every kube-apiserver) — and etcd, from Debian
# unstable's Go source packages, for the CRD dry-run check (`tests/chart.rs`).
#
# Why: the kube tier's kube-apiserver is 1.20 (the newest Debian ships whole); Debian unstable
# ships Kubernetes' apiextensions-apiserver library at the current release with its main
# package, and every Go module it needs, as `golang-*-dev` source packages.
#
# Result: ${KUBEMEDIC_CACHE_DIR:-$HOME/.cache/kubemedic}/kube-current/bin/{apiextensions-apiserver,etcd}
#         and VERSIONS (what was built from which package).
#
# - A fast no-op when both binaries are cached.
# - Nothing is installed: the .deb files are downloaded (checked against the Packages file's
#   SHA-256), unpacked into a private directory, built in GOPATH mode with the Go toolchain
#   from the same archive, and the unpacked tree is deleted after a successful build.
# - KUBEMEDIC_DEBIAN_MIRROR overrides http://deb.debian.org/debian.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=./common.sh source-path=SCRIPTDIR
source "$SCRIPT_DIR/common.sh"

CURRENT_DIR="$KUBE_CACHE_ROOT/kube-current"
BIN="$CURRENT_DIR/bin"
if [[ -x "$BIN/apiextensions-apiserver" && -x "$BIN/etcd" ]]; then
    log "current CRD server already built in $BIN ($(head -n1 "$CURRENT_DIR/VERSIONS" 2>/dev/null))"
    exit 0
fi

MIRROR="${KUBEMEDIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
WORK="$CURRENT_DIR/work"
DEBS="$WORK/debs"
ROOT="$WORK/root"
mkdir -p "$DEBS" "$ROOT" "$BIN"
T0=$SECONDS

log "==> Packages files of Debian unstable from $MIRROR"
for arch in all amd64; do
    curl -fsS --retry 3 -o "$WORK/Packages-$arch.xz" "$MIRROR/dists/sid/main/binary-$arch/Packages.xz" ||
        die "cannot download $MIRROR/dists/sid/main/binary-$arch/Packages.xz"
done

log "==> resolving golang-k8s-apiextensions-apiserver-dev, the Go toolchain and etcd"
python3 "$SCRIPT_DIR/resolve-debs.py" "$WORK/Packages-all.xz" "$WORK/Packages-amd64.xz" -- \
    golang-k8s-apiextensions-apiserver-dev golang-go etcd-server >"$WORK/closure"
log "    $(wc -l <"$WORK/closure") packages, $(awk '{s += $4} END {printf "%d MB", s / 1e6}' "$WORK/closure")"

log "==> downloading and unpacking"
while read -r name version filename _size sha; do
    deb="$DEBS/$(basename "$filename")"
    if [[ ! -f "$deb" ]] || ! echo "$sha  $deb" | sha256sum -c --quiet - 2>/dev/null; then
        curl -fsS --retry 3 -o "$deb.part" "$MIRROR/$filename" || die "cannot download $name $version"
        echo "$sha  $deb.part" | sha256sum -c --quiet - || die "$name $version: SHA-256 does not match the Packages file"
        mv "$deb.part" "$deb"
    fi
    dpkg-deb -x "$deb" "$ROOT"
done <"$WORK/closure"

GOROOT_DIR=$(find "$ROOT/usr/lib" -maxdepth 1 -name 'go-1.*' -type d | sort -V | tail -n1)
[[ -x "$GOROOT_DIR/bin/go" ]] || die "no Go toolchain unpacked under $ROOT/usr/lib"
# The -go package links its sources from the -src package with absolute symlinks into
# /usr/share/go-1.N; point them into the unpacked tree.
GOSHARE="$ROOT/usr/share/$(basename "$GOROOT_DIR")"
for link in "$GOROOT_DIR"/*; do
    if [[ -L "$link" ]]; then
        target=$(readlink "$link")
        case "$target" in /usr/share/*) ln -sfn "$ROOT$target" "$link" ;; esac
    fi
done
[[ -d "$GOSHARE" ]] || die "no Go sources unpacked in $GOSHARE"

log "==> building apiextensions-apiserver with $("$GOROOT_DIR/bin/go" version)"
export GOROOT="$GOROOT_DIR" GOPATH="$ROOT/usr/share/gocode" GO111MODULE=off CGO_ENABLED=0 \
    GOCACHE="$WORK/go-build-cache" GOFLAGS="" GOTOOLCHAIN=local
# The library is versioned 0.N.P for Kubernetes 1.N.P; stamp that into /version.
LIB_VERSION=$(awk '$1 == "golang-k8s-apiextensions-apiserver-dev" {print $2}' "$WORK/closure")
KUBE_MINOR=$(echo "$LIB_VERSION" | cut -d. -f2)
KUBE_GIT_VERSION="v1.$(echo "$LIB_VERSION" | cut -d- -f1 | cut -d. -f2-)"
VERSION_PKG=k8s.io/component-base/version
"$GOROOT_DIR/bin/go" build -trimpath \
    -ldflags "-X $VERSION_PKG.gitVersion=$KUBE_GIT_VERSION -X $VERSION_PKG.gitMajor=1 -X $VERSION_PKG.gitMinor=$KUBE_MINOR" \
    -o "$BIN/apiextensions-apiserver.part" k8s.io/apiextensions-apiserver
install -m 0755 "$ROOT/usr/bin/etcd" "$BIN/etcd"
mv "$BIN/apiextensions-apiserver.part" "$BIN/apiextensions-apiserver"
{
    echo "apiextensions-apiserver $KUBE_GIT_VERSION (Debian golang-k8s-apiextensions-apiserver-dev $LIB_VERSION)"
    awk '$1 == "etcd-server" {print "etcd " $2}' "$WORK/closure"
    "$GOROOT_DIR/bin/go" version
} >"$CURRENT_DIR/VERSIONS"
rm -rf "$WORK"
log "<== built in $((SECONDS - T0)) s: $(tr '\n' ';' <"$CURRENT_DIR/VERSIONS")"
