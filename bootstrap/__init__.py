"""Set-up: create or update the workbook's environment (`python3 -m bootstrap`).

Standard library only, and no import of the workbook's other packages: it runs with whatever
Python 3 the machine has, before the environment (and anything it installs) exists.

    environment   the virtual environment, the pinned packages, Horovod's build and its wheel cache
    apt.sh        apt_install, for the scripts that install Debian packages (Chromium, OpenMPI,
                  sshd, the official Fashion-MNIST) when root or sudo allows
"""
