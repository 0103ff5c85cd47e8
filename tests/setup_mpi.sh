#!/bin/sh
# OpenMPI for Horovod's MPI controller and tests/system/test_mpirun.py: Debian's packages. Run by
# `make mpi` / `make test` BEFORE the environment is built, because bootstrap compiles
# Horovod with MPI only when it finds OpenMPI's compiler wrapper, mpicxx, at build time.
# Does nothing when mpicxx and mpirun are there; installs them when it can.
set -e
command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 && exit 0

. "${0%/*}/../bootstrap/apt.sh"  # called as: sh <its folder>/<it>
status=0
apt_install "OpenMPI for Horovod's MPI controller" openmpi-bin libopenmpi-dev || status=$?
if [ "$status" = 1 ]; then
    echo "OpenMPI not found, so Horovod is built without MPI and tests/system/test_mpirun.py is skipped."
    echo "Install it (Debian/Ubuntu: sudo apt-get install openmpi-bin libopenmpi-dev; macOS:"
    echo "brew install open-mpi), then rebuild Horovod: make env REBUILD_HOROVOD=1"
    exit 0
fi
[ "$status" = 0 ] || exit "$status"
mpirun --version 2>/dev/null | head -n 1
