#!/usr/bin/env bash
# Provision what the browser test of the web example needs: Debian's chromium
# (headless, driven over the DevTools protocol). Idempotent. Installs only when
# root on Debian; otherwise it says why and exits 0 (the browser test then
# skips, or fails under CI).
set -eu

say() { printf 'web/provision.sh: %s\n' "$*"; }

if [ -x /usr/bin/chromium ]; then
    say "/usr/bin/chromium is present: nothing to do"
    exit 0
fi
if [ "$(id -u)" != "0" ]; then
    say "not root: installing nothing"
    exit 0
fi
if [ ! -r /etc/debian_version ] || ! command -v apt-get >/dev/null 2>&1; then
    say "not Debian (no apt-get): installing nothing"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
    say "apt lists missing: apt-get update"
    apt-get update -q
fi
say "installing: chromium"
if ! apt-get install -y -q --no-install-recommends chromium; then
    say "install failed, refreshing the lists and retrying once"
    apt-get update -q
    apt-get install -y -q --no-install-recommends chromium
fi
say "done"
