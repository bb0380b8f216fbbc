#!/usr/bin/env bash
# Build localhost/kubemedic:dev, the image the node tier runs the chart with, from a kubemedic
# binary built here, and import it into the node's containerd.
#
# Usage: kubemedic-image.sh BINARY CONTAINERD_SOCKET
#
# The Dockerfile stays the production recipe (a static musl release build on
# distroless/static, built where a registry can be reached). This image keeps what the chart
# and an operator rely on — the same user (65532:65532), paths (/usr/local/bin/kubemedic,
# /var/lib/kubemedic as the working and data directory, /usr/share/doc/kubemedic), environment,
# entrypoint and command, and nothing writable outside the volumes the chart mounts — but
# carries a binary built here, linked against Debian's glibc (the test build's, or a release
# build with KUBEMEDIC_TEST_RELEASE=1 in scripts/test), with the shared libraries it links, and
# Debian's CA certificates.
# docs/real-node.md lists the differences.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=./common.sh source-path=SCRIPTDIR
source "$SCRIPT_DIR/common.sh"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"

[[ $# -eq 2 ]] || die "usage: $0 BINARY CONTAINERD_SOCKET"
BINARY="$1"
SOCK="$2"
[[ -x "$BINARY" ]] || die "$BINARY is not an executable (build it: cargo build --release --bin kubemedic)"
ensure_apt_packages umoci ca-certificates

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/usr/share/doc/kubemedic" \
    "$rootfs/var/lib/kubemedic" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
cp "$BINARY" "$rootfs/usr/local/bin/kubemedic"
# The shared libraries the binary links, at the paths the dynamic loader looks for them.
for lib in $(ldd "$BINARY" | awk '/=>/ { print $3 } /^[[:space:]]*\// { print $1 }'); do
    [[ -f "$lib" ]] || continue
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
done
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
cp "$ROOT/LICENSE" "$ROOT/THIRD-PARTY-NOTICES.md" "$rootfs/usr/share/doc/kubemedic/"

umoci init --layout "$work/oci"
umoci new --image "$work/oci:dev"
umoci unpack --rootless --image "$work/oci:dev" "$work/bundle" >/dev/null
cp -a "$rootfs/." "$work/bundle/rootfs/"
chown -R 65532:65532 "$work/bundle/rootfs/var/lib/kubemedic"
umoci repack --image "$work/oci:dev" "$work/bundle"
umoci config --image "$work/oci:dev" --os linux --architecture amd64 --author kubemedic \
    --config.user 65532:65532 \
    --config.workingdir /var/lib/kubemedic \
    --config.env KUBEMEDIC_DATA_DIR=/var/lib/kubemedic \
    --config.env KUBEMEDIC_LISTEN=0.0.0.0:8080 \
    --config.env KUBEMEDIC_LOG_FORMAT=json \
    --config.exposedports 8080/tcp \
    --config.entrypoint /usr/local/bin/kubemedic \
    --config.cmd serve \
    --config.label org.opencontainers.image.licenses=Apache-2.0
umoci gc --layout "$work/oci"
tar -C "$work/oci" -cf "$work/kubemedic.tar" .
ctr -a "$SOCK" -n k8s.io images import --base-name localhost/kubemedic "$work/kubemedic.tar" >/dev/null
log "localhost/kubemedic:dev imported ($(du -h "$work/kubemedic.tar" | cut -f1))"
