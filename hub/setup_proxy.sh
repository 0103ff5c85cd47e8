#!/bin/sh
# configurable-http-proxy, JupyterHub's proxy: Node and npm from Debian when missing, then the
# proxy from npm (pinned). Does nothing when it is there. Run by `make hub` (root).
set -e
CHP_VERSION=5.3.0
command -v configurable-http-proxy >/dev/null 2>&1 && exit 0
if ! command -v npm >/dev/null 2>&1; then
    . "${0%/*}/../bootstrap/apt.sh"
    apt_install "Node.js and npm for JupyterHub's proxy" nodejs npm || {
        echo "error: npm not found and apt-get cannot install it; install Node.js and npm" >&2
        exit 1
    }
fi
echo "==> Installing JupyterHub's proxy (npm install -g configurable-http-proxy@$CHP_VERSION)"
npm install -g --no-fund --no-audit "configurable-http-proxy@$CHP_VERSION" >/dev/null
command -v configurable-http-proxy
