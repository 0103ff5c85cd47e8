#!/bin/sh
# bubblewrap, the sandbox in which the grader runs a learner's script for real
# (grader/running/sandbox.py, tests/system/test_sandbox.py). Run by `make sandbox`, `make test`, `make grade`.
# Does nothing when bwrap is there; installs Debian's package when it can. For `make grade`
# (SANDBOX_REQUIRED=1) a missing bwrap is an error: students' scripts are never run unsandboxed.
set -e
command -v bwrap >/dev/null 2>&1 && exit 0

. "${0%/*}/../bootstrap/apt.sh"  # called as: sh <its folder>/<it>
status=0
apt_install "bubblewrap, the grader's sandbox" bubblewrap || status=$?
if [ "$status" = 1 ]; then
    echo "bubblewrap (bwrap) is not installed and apt-get can't run here (not root, no sudo)."
    echo "The grader runs students' scripts only inside it, as root: install it"
    echo "(Debian/Ubuntu: sudo apt-get install bubblewrap). Not root, tests/system/test_sandbox.py's"
    echo "attacks are skipped."
    [ "${SANDBOX_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
fi
[ "$status" = 0 ] || exit "$status"
bwrap --version
