#!/usr/bin/env bash
# Provision the real single-node Kubernetes 1.20 cluster the tests start
# (tests/kubernetes/realcluster/cluster.py): etcd, Debian's docker.io for the
# kubelet's own dockerd, a static busybox for the local images, and the four
# Kubernetes binaries built once from Debian's `kubernetes` source package
# (build.sh) and cached outside the checkout, keyed by the build scripts'
# hash, so a second run reuses them. Idempotent. Installs only when root on
# Debian; otherwise it says why and exits 0 (the tests then skip, or fail
# under CI). Starts nothing.
#
# Cache: ${ASYNCSCHED_CACHE_DIR:-/var/cache/asyncsched}/kube-v1.20.2-KEY/bin
set -eu

PROVISION_NAME=kubernetes/realcluster/provision.sh
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../provision_lib.sh"
can_install || exit 0

CACHE_ROOT=${ASYNCSCHED_CACHE_DIR:-/var/cache/asyncsched}
KEY=$(cat "$HERE/build.sh" "$HERE/patch_source.py" | sha256sum | cut -c1-16)
OUT="$CACHE_ROOT/kube-v1.20.2-$KEY"

static_busybox() {
    [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1
}

built() {
    [ -f "$OUT/VERSION" ] && for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
        [ -x "$OUT/bin/$b" ] || return 1
    done
}

# runtime: etcd + etcdctl, dockerd (and its iptables), openssl for the certs
needed="etcd-server etcd-client docker.io openssl iptables"
static_busybox || needed="$needed busybox-static"
# build: only while the binaries are not cached
built || needed="$needed golang-go gcc libc6-dev dpkg-dev"

missing=""
for pkg in $needed; do
    installed "$pkg" || missing="$missing $pkg"
done

if [ -n "$missing" ]; then
    # no service may start while installing (the fixture starts etcd and dockerd)
    # shellcheck disable=SC2086
    apt_install_without_services $missing
fi

if built; then
    say "Kubernetes v1.20.2 binaries cached in $OUT/bin: nothing to build"
    exit 0
fi

# `apt-get source` needs deb-src lines: add them for the Debian archives the
# machine already uses (deb822 .sources stanzas and one-line sources.list).
has_deb_src() {
    grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/
}
if ! has_deb_src; then
    src_list=/etc/apt/sources.list.d/asyncsched-deb-src.sources
    : >"$src_list.tmp"
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] || continue
        awk 'BEGIN { RS = ""; ORS = "\n\n" }
             /URIs:[^\n]*debian/ && /Types:[^\n]*deb/ { sub(/Types:[^\n]*/, "Types: deb-src"); print }' \
            "$f" >>"$src_list.tmp"
    done
    if [ -f /etc/apt/sources.list ]; then
        awk '$1 == "deb" && /debian/ { $1 = "deb-src"; print }' /etc/apt/sources.list >"$src_list.list.tmp"
        if [ -s "$src_list.list.tmp" ]; then
            mv "$src_list.list.tmp" /etc/apt/sources.list.d/asyncsched-deb-src.list
        else
            rm -f "$src_list.list.tmp"
        fi
    fi
    if [ -s "$src_list.tmp" ]; then mv "$src_list.tmp" "$src_list"; else rm -f "$src_list.tmp"; fi
    if ! has_deb_src; then
        say "no Debian archive found in the apt sources: cannot fetch the kubernetes source"
        exit 1
    fi
    say "added deb-src lines; apt-get update"
    apt-get update -q
fi

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/kube-build.lock"
flock 9
if built; then
    say "built meanwhile by another run: $OUT/bin"
    exit 0
fi
say "building Kubernetes v1.20.2 from source into $OUT (several minutes, once)"
start=$(date +%s)
"$HERE/build.sh" "$OUT"
say "built in $(($(date +%s) - start)) s"
# builds of older versions of the scripts are not used any more
for old in "$CACHE_ROOT"/kube-v1.20.2-*; do
    if [ "$old" != "$OUT" ] && [ -d "$old" ]; then
        say "removing the outdated build $old"
        rm -rf "$old"
    fi
done
