#!/bin/sh
# Chromium for tests/test_browser.py: Debian's packages (a browser that a test tool downloads
# for itself cannot be fetched everywhere the tests run). Run by `make browser` / `make test`.
# Does nothing when $CHROMIUM (default /usr/bin/chromium) is there; installs it when it can.
set -e
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] && exit 0

if [ "$(id -u)" = 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
else
    SUDO=none
fi
if ! command -v apt-get >/dev/null 2>&1 || [ "$SUDO" = none ]; then
    echo "Chromium not found at $CHROMIUM, so tests/test_browser.py will be skipped (in CI: fail)."
    echo "Install it (Debian/Ubuntu: sudo apt-get install chromium chromium-driver), or point"
    echo "CHROMIUM at a Chromium or Chrome executable."
    exit 0
fi
echo "==> Installing Chromium for the browser test (apt-get install chromium chromium-driver)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
"$CHROMIUM" --version 2>/dev/null
