"""A stand-in OpenMPI and a stand-in environment, for the tests of bootstrap/safe_env.py in
the unit and smoke tiers."""

import pytest

from bootstrap import safe_env


@pytest.fixture
def fake_openmpi(tmp_path):
    """A folder with an `mpirun` that prints the variable and its arguments, and a fake venv."""
    system = tmp_path / "system-bin"
    system.mkdir()
    for name in safe_env.WRAPPED:
        program = system / name
        program.write_text(f'#!/bin/sh\necho "{name} HWLOC=[${{HWLOC_COMPONENTS-unset}}] $*"\n')
        program.chmod(0o755)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    return venv, system
