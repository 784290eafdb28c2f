# Shared by the tests' provision.sh scripts (sourced, not run): the checks that
# decide whether to install at all, and an apt install that refreshes the
# package lists only when they are missing or the install fails.
#
#   PROVISION_NAME=docker/provision.sh
#   . "$(dirname "$0")/../provision_lib.sh"
#   can_install || exit 0
#   apt_install_packages pkg1 pkg2          # or, when a package ships a service:
#   apt_install_without_services pkg1 pkg2

say() { printf '%s: %s\n' "${PROVISION_NAME:-provision.sh}" "$*"; }

# True when root on Debian; otherwise says why (the tests then skip, or fail
# under CI) and returns 1.
can_install() {
    if [ "$(id -u)" != "0" ]; then
        say "not root: installing nothing"
        return 1
    fi
    if [ ! -r /etc/debian_version ] || ! command -v apt-get >/dev/null 2>&1; then
        say "not Debian (no apt-get): installing nothing"
        return 1
    fi
}

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

_apt_get_install() {
    apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 "$@"
}

# Install the given packages; `apt-get update` first only when the lists are
# missing, and once more (then a retry) when the install fails.
apt_install_packages() {
    export DEBIAN_FRONTEND=noninteractive
    if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
        say "apt lists missing: apt-get update"
        apt-get update -q
    fi
    say "installing: $*"
    if ! _apt_get_install "$@"; then
        say "install failed, refreshing the lists and retrying once"
        apt-get update -q
        _apt_get_install "$@"
    fi
    say "done"
}

# apt_install_packages, with no service started by the packages' maintainer
# scripts (no systemd here; the fixtures start their own mariadbd, registry,
# etcd and dockerd): a refusing /usr/sbin/policy-rc.d meanwhile, removed
# afterwards (also on failure) unless it was there already.
apt_install_without_services() {
    if [ -e /usr/sbin/policy-rc.d ]; then
        apt_install_packages "$@"
        return
    fi
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    apt_install_packages "$@"
    rm -f /usr/sbin/policy-rc.d
    trap - EXIT
}
