#!/bin/sh
# The official Fashion-MNIST from Debian's package dataset-fashion-mnist (MIT licence), the first
# source `python -m workbook.fashion_data prepare` tries after a directory given with --from. Run
# by `make data` (so by `make lab`): installs the package when it is missing and apt-get can run
# (root or password-less sudo). Never fails: without the package, prepare tries the Keras cache and
# the official download. Does nothing when the package is there or the official data is prepared.
DIR=${FASHION_MNIST_DEBIAN_DIR:-/usr/share/datasets/fashion-mnist}
PREPARED=${FASHION_MNIST_PREPARED:-data/fashion_mnist/manifest.json}
[ -f "$DIR/train-images-idx3-ubyte.gz" ] && exit 0
grep -q '"split": "official"' "$PREPARED" 2>/dev/null && exit 0

. "${0%/*}/../bootstrap/apt.sh"  # called as: sh <its folder>/<it>
status=0
apt_install "the official Fashion-MNIST" dataset-fashion-mnist || status=$?
if [ "$status" = 1 ]; then
    echo "Debian's package dataset-fashion-mnist (the official Fashion-MNIST) is not installed and"
    echo "cannot be installed here (it needs apt-get, and root or sudo); trying the other sources."
elif [ "$status" != 0 ]; then
    echo "apt-get could not install dataset-fashion-mnist; trying the other sources."
fi
exit 0
