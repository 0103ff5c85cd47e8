#!/bin/sh
# OpenMPI for Horovod's MPI controller and tests/test_mpirun.py: Debian's packages. Run by
# `make mpi` / `make test` BEFORE the environment is built, because bootstrap compiles
# Horovod with MPI only when it finds OpenMPI's compiler wrapper, mpicxx, at build time.
# Does nothing when mpicxx and mpirun are there; installs them when it can.
set -e
command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 && exit 0

if [ "$(id -u)" = 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
else
    SUDO=none
fi
if ! command -v apt-get >/dev/null 2>&1 || [ "$SUDO" = none ]; then
    echo "OpenMPI not found, so Horovod is built without MPI and tests/test_mpirun.py is skipped."
    echo "Install it (Debian/Ubuntu: sudo apt-get install openmpi-bin libopenmpi-dev; macOS:"
    echo "brew install open-mpi), then rebuild Horovod: make env REBUILD_HOROVOD=1"
    exit 0
fi
echo "==> Installing OpenMPI for Horovod's MPI controller (apt-get install openmpi-bin libopenmpi-dev)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
mpirun --version 2>/dev/null | head -n 1
