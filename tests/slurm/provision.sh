#!/usr/bin/env bash
# Provision what the Slurm tests need: slurmctld, slurmd, the Slurm client
# commands and munge, plus slurmdbd and mariadb-server for the second test
# cluster (the one with accounting storage). Idempotent. Installs only when root on Debian; otherwise
# it says why and exits 0 (the tests then skip, or fail under CI). Starts
# nothing: the pytest fixture in tests/slurm/conftest.py runs the daemons.
set -eu

PROVISION_NAME=slurm/provision.sh
. "$(dirname "$0")/../provision_lib.sh"
can_install || exit 0

missing=""
for pkg in slurmctld slurmd slurm-client munge slurmdbd mariadb-server; do
    installed "$pkg" || missing="$missing $pkg"
done

if [ -z "$missing" ]; then
    say "slurmctld, slurmd, slurm-client, munge, slurmdbd and mariadb-server are present: nothing to do"
    exit 0
fi

# no service may start while installing (no systemd here; the fixture starts
# them): in particular not the system MariaDB, the fixture runs its own mariadbd
# shellcheck disable=SC2086
apt_install_without_services $missing
