"""The environment itself is safe from OpenMPI's X-display hang (bootstrap/safe_env.py), and
`make test` gets Horovod with MPI and never passes an MPI test as skipped.

The real runs start from a plain shell: `env -i` with PATH=/usr/bin:/bin, nothing exported by
hand, while conftest's silent listener holds 127.0.0.1:6006 (TensorBoard's port). A hang never
ends; a run that works takes 35-120 s on 2 busy cores, so each has a limit of 300 s.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bootstrap import environment as bootstrap
from bootstrap import safe_env
from processes import SESSION_MARKER, TEST_MARKER
from workbook.facts import SAFE_PROCESS_ENV
from workbook.paths import REPO

THIS_ENV = Path(sys.prefix)
SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"
TINY_RUN = ["--data-dir", str(REPO / "data" / "sample"), "--train-images", "1024",
            "--test-images", "256", "--depth", "10", "--width", "1", "--epochs", "1",
            "--steps-per-epoch", "8"]
HANG_LIMIT_S = 300


def test_the_hook_sets_what_the_workbook_sets():
    assert SAFE_PROCESS_ENV == {safe_env.VARIABLE: safe_env.VALUE}


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


def test_install_writes_the_hook_and_wrappers_that_run_the_real_mpirun(fake_openmpi):
    venv, system = fake_openmpi
    path = f"{venv / 'bin'}:{system}:/usr/bin:/bin"
    done = safe_env.install(venv, {"PATH": path})
    assert len(done) == 3, done
    assert safe_env.install(venv, {"PATH": path}) == []  # idempotent
    hook = venv / "lib" / "python3.11" / "site-packages" / safe_env.PTH_NAME
    assert hook.read_text() == safe_env.PTH_TEXT

    def run(env):
        reply = subprocess.run([str(venv / "bin" / "mpirun"), "-np", "2", "x"], env=env,
                               capture_output=True, text=True, timeout=30)
        assert reply.returncode == 0, reply.stderr
        return reply.stdout.strip()

    assert run({"PATH": path}) == "mpirun HWLOC=[-gl] -np 2 x"
    assert run({"PATH": path, "HWLOC_COMPONENTS": ""}) == "mpirun HWLOC=[] -np 2 x"  # kept
    assert run({"PATH": path, "HWLOC_COMPONENTS": "-gl,-opencl"}) == \
        "mpirun HWLOC=[-gl,-opencl] -np 2 x"


def test_a_real_mpirun_in_the_environment_is_never_replaced(fake_openmpi):
    venv, system = fake_openmpi
    own = venv / "bin" / "mpirun"
    own.write_text("#!/bin/sh\necho conda's own\n")
    done = safe_env.install(venv, {"PATH": f"{system}:/usr/bin:/bin"})
    assert own.read_text() == "#!/bin/sh\necho conda's own\n"
    assert any(line.startswith(f"kept {own}") for line in done), done


def test_without_openmpi_there_is_no_wrapper(fake_openmpi, tmp_path):
    venv, system = fake_openmpi
    safe_env.install(venv, {"PATH": f"{system}:/usr/bin:/bin"})
    assert (venv / "bin" / "mpirun").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    safe_env.install(venv, {"PATH": str(empty)})
    assert not (venv / "bin" / "mpirun").exists()


def test_the_python_of_this_environment_sets_the_variable_from_a_plain_shell():
    hooks = list((THIS_ENV / "lib").glob(f"python3*/site-packages/{safe_env.PTH_NAME}"))
    if not hooks:
        pytest.skip("no start-up hook in this environment: make env writes it")
    printed = plain_shell(f"{THIS_ENV}/bin/python -c "
                          "'import os; print(os.environ.get(\"HWLOC_COMPONENTS\"))'", timeout=60)
    assert printed.stdout.strip() == "-gl", printed.stderr
    kept = plain_shell(f"HWLOC_COMPONENTS=-opencl {THIS_ENV}/bin/python -c "
                       "'import os; print(os.environ[\"HWLOC_COMPONENTS\"])'", timeout=60)
    assert kept.stdout.strip() == "-opencl"


# --- point 6: make test and MPI ------------------------------------------------------------------

def test_make_test_rebuilds_a_build_without_mpi_once_mpicxx_is_there(tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "mpicxx").write_text("#!/bin/sh\n")
    (folder / "mpicxx").chmod(0o755)
    state = bootstrap.wanted_state("cpu", bootstrap.MpiDecision(False, "no mpicxx"))
    environ = {"PATH": str(folder)}
    kept = bootstrap.mpi_decision("cpu", state, environ=environ)
    assert not kept.build and "make env REBUILD_HOROVOD=1" in kept.reason  # make lab, make env
    wanted = bootstrap.mpi_decision("cpu", state, environ=environ, want_mpi=True)
    assert wanted.build and "rebuilding Horovod with it" in wanted.reason  # make test
    assert not bootstrap.stamp_matches(state, bootstrap.wanted_state("cpu", wanted))


def test_make_test_passes_want_mpi_and_requires_mpi():
    dry = subprocess.run(["make", "-n", "--no-print-directory", "test"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert "--want-mpi" in dry.stdout and "WORKBOOK_REQUIRE_MPI=1" in dry.stdout, dry.stdout
    lab = subprocess.run(["make", "-n", "--no-print-directory", "env"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert "--want-mpi" not in lab.stdout


def test_under_make_test_a_skip_for_want_of_mpi_fails(tmp_path):
    (tmp_path / "conftest.py").write_text(
        (Path(__file__).with_name("conftest.py")).read_text().replace(
            "sys.path.insert(0, str(Path(__file__).resolve().parent))",
            f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})"))
    (tmp_path / "test_skips.py").write_text(textwrap.dedent("""
        import pytest

        def test_needs_mpi():
            pytest.skip("Horovod was built without MPI: make env REBUILD_HOROVOD=1")

        def test_needs_data():
            pytest.skip("no sample data")
    """))
    command = [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider",
               "-o", "addopts=", str(tmp_path / "test_skips.py")]
    relaxed = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                             env={**os.environ, "WORKBOOK_REQUIRE_MPI": "0"})
    assert relaxed.returncode == 0 and "2 skipped" in relaxed.stdout, relaxed.stdout
    strict = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={**os.environ, "WORKBOOK_REQUIRE_MPI": "1"})
    assert strict.returncode == 1, strict.stdout
    assert "1 failed, 1 skipped" in strict.stdout, strict.stdout
    assert "FAILED" in strict.stdout and "test_needs_mpi" in strict.stdout


# --- point 7, for real: from a plain shell, TensorBoard's port taken -----------------------------

def plain_shell(command: str, timeout: float) -> subprocess.CompletedProcess:
    """`sh -c command` with nothing but a minimal PATH and HOME (and the tests' process markers,
    so that whatever it leaves behind is found and killed)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    for marker in (TEST_MARKER, SESSION_MARKER):
        if marker in os.environ:
            env[marker] = os.environ[marker]
    return subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True,
                          timeout=timeout, start_new_session=True, cwd=REPO)


@pytest.fixture
def mpi_environment():
    """Skips (a failure under make test) unless this environment's Horovod has MPI."""
    if safe_env.real_program("mpirun", THIS_ENV) is None:
        pytest.skip("no OpenMPI mpirun: make mpi, then make env REBUILD_HOROVOD=1")
    probe = plain_shell(f"{THIS_ENV}/bin/python -c 'import horovod.tensorflow as h; "
                        "print(h.mpi_built())'", timeout=120)
    if not probe.stdout.strip().endswith("True"):
        pytest.skip("Horovod in this environment was built without MPI: make env "
                    "REBUILD_HOROVOD=1 after make mpi")
    if not (THIS_ENV / "bin" / "mpirun").exists():
        pytest.skip("no mpirun wrapper in this environment (built before it existed): make env")


@pytest.mark.slow
@pytest.mark.parametrize("launch", ["python", "horovodrun", "mpirun"])
def test_a_2_worker_run_from_a_plain_shell_does_not_hang(launch, mpi_environment,
                                                         tensorboard_port_taken, tmp_path):
    assert tensorboard_port_taken  # 127.0.0.1:6006 is held for the whole session
    bin_dir = THIS_ENV / "bin"
    run = " ".join(shlex.quote(a) for a in [str(SOLUTION), *TINY_RUN,
                                            "--log-dir", str(tmp_path / "logs")])
    root = "--allow-run-as-root " if os.geteuid() == 0 else ""
    commands = {
        # hvd.init() in a plain process starts OpenMPI's orted: the hang of the issue.
        "python": f"{bin_dir}/python {run}",
        "horovodrun": f"{bin_dir}/horovodrun --mpi -np 2 {bin_dir}/python {run}",
        "mpirun": f"{bin_dir}/mpirun {root}-np 2 --oversubscribe --bind-to none "
                  f"{bin_dir}/python {run}",
    }
    try:
        reply = plain_shell(commands[launch], timeout=HANG_LIMIT_S)
    except subprocess.TimeoutExpired as stuck:
        pytest.fail(f"{launch} from a plain shell still running after {HANG_LIMIT_S} s: "
                    f"{(stuck.stdout or b'')[-1500:]!r}")
    output = reply.stdout + reply.stderr
    assert reply.returncode == 0, output[-3000:]
    assert "RESULT {" in output, output[-3000:]
    # Rank 0's bar counts 4 steps of 8 when two workers split the epoch; a lone process, 8.
    steps = "8/8" if launch == "python" else "4/4"
    assert re.search(rf"\b{steps}\b", output), output[-3000:]
