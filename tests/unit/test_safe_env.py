"""The environment itself is safe from OpenMPI's X-display hang (bootstrap/safe_env.py): the hook
sets what the workbook sets, a real mpirun is never replaced. Run from a plain shell and under
make test: tests/smoke/test_safe_env_processes.py; real runs:
tests/system/test_safe_env_runs.py.
"""

from __future__ import annotations

from bootstrap import environment as bootstrap
from bootstrap import safe_env
from fake_openmpi import fake_openmpi  # noqa: F401 (a fixture)
from workbook.facts import SAFE_PROCESS_ENV


def test_the_hook_sets_what_the_workbook_sets():
    assert SAFE_PROCESS_ENV == {safe_env.VARIABLE: safe_env.VALUE}


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
