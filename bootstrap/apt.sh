# Shared by the set-up scripts that install Debian packages (tests/setup_*.sh,
# data/setup_debian_package.sh); source it, then call:
#
#   apt_install "what it is for" package...
#
# Returns 0 when the packages were installed, 1 when apt-get cannot run here (no apt-get, or
# neither root nor password-less sudo: the caller says what to do instead), and apt-get's own
# status when it failed. Waits for another apt-get (another set-up) instead of failing on its lock.
apt_install() {
    what=$1
    shift
    if [ "$(id -u)" = 0 ]; then
        sudo=
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo=sudo
    else
        return 1
    fi
    command -v apt-get >/dev/null 2>&1 || return 1
    echo "==> Installing $what (apt-get install $*)"
    # A failed mirror may still leave the packages installable from the cache.
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" \
        >/dev/null
}
