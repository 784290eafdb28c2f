#!/usr/bin/env bash
# Provision what the Slurm tests need: slurmctld, slurmd, the Slurm client
# commands and munge. Idempotent. Installs only when root on Debian; otherwise
# it says why and exits 0 (the tests then skip, or fail under CI). Starts
# nothing: the pytest fixture in tests/slurm/conftest.py runs the daemons.
set -eu

say() { printf 'slurm/provision.sh: %s\n' "$*"; }

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

missing=""
for pkg in slurmctld slurmd slurm-client munge; do
    installed "$pkg" || missing="$missing $pkg"
done

if [ -z "$missing" ]; then
    say "slurmctld, slurmd, slurm-client and munge are present: nothing to do"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# no service may start while installing (no systemd here; the fixture starts them)
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    own_policy=1
fi
cleanup() { if [ -n "$own_policy" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

apt_install() {
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 $missing
}

if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
    say "apt lists missing: apt-get update"
    apt-get update -q
fi
say "installing:$missing"
if ! apt_install; then
    say "install failed, refreshing the lists and retrying once"
    apt-get update -q
    apt_install
fi
say "done"
