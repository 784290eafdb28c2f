#!/usr/bin/env bash
# Provision what the Docker tests need: docker.io (dockerd + CLI), a static
# busybox for the test image, and for the workspace push tests a real image
# registry (docker-registry: the distribution registry 2.8) plus htpasswd
# (apache2-utils) for its authenticated instance. Idempotent. Installs only
# when root on Debian; otherwise it says why and exits 0 (the tests then skip,
# or fail under CI). Starts nothing: the pytest fixtures run dockerd and the
# registries themselves.
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
if ! command -v docker-registry >/dev/null 2>&1; then
    installed docker-registry || missing="$missing docker-registry"
fi
if ! command -v htpasswd >/dev/null 2>&1; then
    installed apache2-utils || missing="$missing apache2-utils"
fi

if [ -z "$missing" ]; then
    say "docker.io, a static busybox, docker-registry and htpasswd are present: nothing to do"
    exit 0
fi

# no service may start while installing (no systemd here; the fixtures start
# their own): in particular not the system registry of docker-registry
# shellcheck disable=SC2086
apt_install_without_services $missing
