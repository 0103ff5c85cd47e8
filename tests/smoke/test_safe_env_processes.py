"""The safe environment (bootstrap/safe_env.py) with real processes: the install writes the hook
and wrappers that run the real mpirun, the environment's Python sets the variable from a plain
shell, and `make test` gets Horovod with MPI and never passes an MPI test as skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bootstrap import safe_env
from fake_openmpi import fake_openmpi  # noqa: F401 (a fixture)
from processes import plain_shell
from workbook.paths import REPO

THIS_ENV = Path(sys.prefix)


def test_install_writes_the_hook_and_wrappers_that_run_the_real_mpirun(fake_openmpi):
    venv, system = fake_openmpi
    path = f"{venv / 'bin'}:{system}:/usr/bin:/bin"
    done = safe_env.install(venv, {"PATH": path})
    assert len(done) == 3, done
    assert safe_env.install(venv, {"PATH": path}) == []  # idempotent
    hook = venv / "lib" / "python3.11" / "site-packages" / safe_env.PTH_NAME
    assert hook.read_text() == safe_env.PTH_TEXT

    def run(env):
        reply = subprocess.run(
            [str(venv / "bin" / "mpirun"), "-np", "2", "x"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert reply.returncode == 0, reply.stderr
        return reply.stdout.strip()

    assert run({"PATH": path}) == "mpirun HWLOC=[-gl] -np 2 x"
    assert run({"PATH": path, "HWLOC_COMPONENTS": ""}) == "mpirun HWLOC=[] -np 2 x"  # kept
    assert (
        run({"PATH": path, "HWLOC_COMPONENTS": "-gl,-opencl"})
        == "mpirun HWLOC=[-gl,-opencl] -np 2 x"
    )


def test_the_python_of_this_environment_sets_the_variable_from_a_plain_shell():
    hooks = list((THIS_ENV / "lib").glob(f"python3*/site-packages/{safe_env.PTH_NAME}"))
    if not hooks:
        pytest.skip("no start-up hook in this environment: make env writes it")
    printed = plain_shell(
        f"{THIS_ENV}/bin/python -c 'import os; print(os.environ.get(\"HWLOC_COMPONENTS\"))'",
        timeout=60,
    )
    assert printed.stdout.strip() == "-gl", printed.stderr
    kept = plain_shell(
        f"HWLOC_COMPONENTS=-opencl {THIS_ENV}/bin/python -c "
        "'import os; print(os.environ[\"HWLOC_COMPONENTS\"])'",
        timeout=60,
    )
    assert kept.stdout.strip() == "-opencl"


def test_make_test_passes_want_mpi_and_requires_mpi():
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "test"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--want-mpi" in dry.stdout and "WORKBOOK_REQUIRE_MPI=1" in dry.stdout, dry.stdout
    lab = subprocess.run(
        ["make", "-n", "--no-print-directory", "env"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--want-mpi" not in lab.stdout


def test_under_make_test_a_skip_for_want_of_mpi_fails(tmp_path):
    (tmp_path / "conftest.py").write_text(
        (Path(__file__).resolve().parents[1] / "conftest.py")
        .read_text()
        .replace(
            "sys.path.insert(0, str(Path(__file__).resolve().parent))",
            f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})",
        )
    )
    (tmp_path / "test_skips.py").write_text(
        textwrap.dedent("""
        import pytest

        def test_needs_mpi():
            pytest.skip("Horovod was built without MPI: make env REBUILD_HOROVOD=1")

        def test_needs_data():
            pytest.skip("no sample data")
    """)
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rfs",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        str(tmp_path / "test_skips.py"),
    ]
    relaxed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "WORKBOOK_REQUIRE_MPI": "0"},
    )
    assert relaxed.returncode == 0 and "2 skipped" in relaxed.stdout, relaxed.stdout
    strict = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "WORKBOOK_REQUIRE_MPI": "1"},
    )
    assert strict.returncode == 1, strict.stdout
    assert "1 failed, 1 skipped" in strict.stdout, strict.stdout
    assert "FAILED" in strict.stdout and "test_needs_mpi" in strict.stdout
