#!/usr/bin/env bash
# Provision what the browser test of the web example needs: Debian's chromium
# (headless, driven over the DevTools protocol). Idempotent. Installs only when
# root on Debian; otherwise it says why and exits 0 (the browser test then
# skips, or fails under CI).
set -eu

PROVISION_NAME=web/provision.sh
. "$(dirname "$0")/../provision_lib.sh"

if [ -x /usr/bin/chromium ]; then
    say "/usr/bin/chromium is present: nothing to do"
    exit 0
fi
can_install || exit 0
apt_install_packages chromium
