#!/bin/sh
# OpenSSH's server and iproute2 for tests/system/test_multi_host.py, which builds two "hosts" as Linux
# network namespaces on this machine and starts a private sshd in each (its own config, host key
# and authorized key, all in a temporary folder; the machine's /etc/ssh and ~/.ssh are not used).
# Does nothing when sshd and ip are there; installs Debian's packages when it can.
# Note: on a machine run by systemd, Debian's openssh-server also enables and starts the
# system's own sshd on port 22; the test does not need it (`systemctl disable --now ssh`).
set -e
SSHD=${SSHD:-/usr/sbin/sshd}
[ -x "$SSHD" ] && command -v ip >/dev/null 2>&1 && exit 0

. "${0%/*}/../bootstrap/apt.sh"  # called as: sh <its folder>/<it>
status=0
apt_install "OpenSSH's server for the multi-host test" openssh-server openssh-client iproute2 || status=$?
if [ "$status" = 1 ]; then
    echo "sshd not found at $SSHD (or no ip command), so tests/system/test_multi_host.py will be skipped."
    echo "Install them (Debian/Ubuntu: sudo apt-get install openssh-server openssh-client iproute2)."
    exit 0
fi
[ "$status" = 0 ] || exit "$status"
"$SSHD" -V 2>&1 | head -n 1
