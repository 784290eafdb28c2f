#!/usr/bin/env bash
# Provision what the Docker tests need: docker.io (dockerd + CLI) and a static
# busybox for the test image. Idempotent. Installs only when root on Debian;
# otherwise it says why and exits 0 (the tests then skip, or fail under CI).
set -eu

say() { printf 'provision.sh: %s\n' "$*"; }

if [ "$(id -u)" != "0" ]; then
    say "not root: installing nothing"
    exit 0
fi
if [ ! -r /etc/debian_version ] || ! command -v apt-get >/dev/null 2>&1; then
    say "not Debian (no apt-get): installing nothing"
    exit 0
fi

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

static_busybox() {
    [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1
}

missing=""
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    installed docker.io || missing="$missing docker.io"
fi
if ! static_busybox; then
    installed busybox-static || missing="$missing busybox-static"
fi

if [ -z "$missing" ]; then
    say "docker.io and a static busybox are present: nothing to do"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
    say "apt lists missing: apt-get update"
    apt-get update -q
fi
say "installing:$missing"
# shellcheck disable=SC2086
if ! apt-get install -y -q --no-install-recommends $missing; then
    say "install failed, refreshing the lists and retrying once"
    apt-get update -q
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing
fi
say "done"
