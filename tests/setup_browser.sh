#!/bin/sh
# Chromium for tests/system/test_browser.py: Debian's packages (a browser that a test tool downloads
# for itself cannot be fetched everywhere the tests run). Run by `make browser` / `make test`.
# Does nothing when $CHROMIUM (default /usr/bin/chromium) is there; installs it when it can.
set -e
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] && exit 0

. "${0%/*}/../bootstrap/apt.sh"  # called as: sh <its folder>/<it>
status=0
apt_install "Chromium for the browser test" chromium chromium-driver || status=$?
if [ "$status" = 1 ]; then
    echo "Chromium not found at $CHROMIUM, so tests/system/test_browser.py will be skipped (in CI: fail)."
    echo "Install it (Debian/Ubuntu: sudo apt-get install chromium chromium-driver), or point"
    echo "CHROMIUM at a Chromium or Chrome executable."
    exit 0
fi
[ "$status" = 0 ] || exit "$status"
"$CHROMIUM" --version 2>/dev/null
