#!/usr/bin/env bash
# Provision what the Docker tests need: docker.io (dockerd + CLI) and a static
# busybox for the test image. Idempotent. Installs only when root on Debian;
# otherwise it says why and exits 0 (the tests then skip, or fail under CI).
set -eu

PROVISION_NAME=docker/provision.sh
. "$(dirname "$0")/../provision_lib.sh"
can_install || exit 0

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
# shellcheck disable=SC2086
apt_install_packages $missing
