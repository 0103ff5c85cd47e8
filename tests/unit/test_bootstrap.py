"""The environment set-up: idempotent, and precise when something is missing."""

import pytest

from bootstrap import environment as bootstrap
from workbook.paths import REPO


def test_stamp_changes_with_the_requirements(tmp_path, monkeypatch):
    before = bootstrap.wanted_state("cpu")
    copy = tmp_path / "requirements"
    copy.mkdir()
    for path in (REPO / "requirements").glob("*.txt"):
        (copy / path.name).write_text(path.read_text())
    monkeypatch.setattr(bootstrap, "REQUIREMENTS", copy)
    assert bootstrap.wanted_state("cpu") == before
    (copy / "workbook.txt").write_text((copy / "workbook.txt").read_text() + "tqdm==4.0.0\n")
    changed = bootstrap.wanted_state("cpu")
    assert changed["requirements_sha256"] != before["requirements_sha256"]
    # Horovod is only rebuilt when what it is compiled against changes.
    assert changed["horovod_inputs_sha256"] == before["horovod_inputs_sha256"]
    (copy / "tensorflow-cpu.txt").write_text("tensorflow-cpu==2.15.0\n")
    assert bootstrap.wanted_state("cpu")["horovod_inputs_sha256"] != before["horovod_inputs_sha256"]


def test_gpu_build_uses_nccl():
    assert bootstrap.HOROVOD_BUILD_ENV["gpu"]["HOROVOD_GPU_OPERATIONS"] == "NCCL"
    assert "HOROVOD_GPU_OPERATIONS" not in bootstrap.HOROVOD_BUILD_ENV["cpu"]


def test_missing_compilers_are_named_with_their_fix(monkeypatch):
    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: None)
    problems = bootstrap.check_compilers()
    assert any("cmake not found" in p and "apt-get install cmake" in p for p in problems)
    assert any("g++" in p and "apt-get install g++" in p for p in problems)


def test_wrong_python_names_how_to_get_3_11(monkeypatch):
    monkeypatch.setattr(bootstrap.sys, "version_info", (3, 12, 0))
    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: None)
    with pytest.raises(bootstrap.SetupError, match="Python 3.11 is required"):
        bootstrap.find_base_python()


def test_horovod_check_build_parsing():
    output = "Available Frameworks:\n    [X] TensorFlow\n    [ ] PyTorch\n"
    assert bootstrap.horovod_has(output, "TensorFlow")
    assert not bootstrap.horovod_has(output, "PyTorch")


@pytest.fixture
def path_with_mpicxx(tmp_path):
    """A PATH on which an executable named mpicxx is found (the decision only looks for it)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    wrapper = folder / "mpicxx"
    wrapper.write_text("#!/bin/sh\nexit 0\n")
    wrapper.chmod(0o755)
    return str(folder)


def gloo_only_stamp(device="cpu"):
    """What bootstrap wrote before MPI was decided automatically (the keys and the flags)."""
    return {
        "device": device,
        "requirements_sha256": "x",
        "horovod_inputs_sha256": bootstrap.horovod_inputs_sha256(device),
        "horovod_build": {**bootstrap.HOROVOD_BUILD_ENV[device], "HOROVOD_WITHOUT_MPI": "1"},
    }


def test_mpi_is_built_when_mpicxx_is_on_path(path_with_mpicxx, tmp_path):
    found = bootstrap.mpi_decision("cpu", environ={"PATH": path_with_mpicxx})
    assert found.build and path_with_mpicxx in found.reason
    assert found.controllers() == ["Gloo", "MPI"]
    assert found.describe().startswith("Horovod controllers: Gloo and MPI (")
    missing = bootstrap.mpi_decision("cpu", environ={"PATH": str(tmp_path)})
    assert not missing.build and "apt-get install openmpi-bin libopenmpi-dev" in missing.reason
    assert missing.describe().startswith("Horovod controllers: Gloo (")


def test_the_user_variables_decide_over_what_is_found(path_with_mpicxx, tmp_path):
    assert not bootstrap.mpi_decision(
        "cpu", environ={"PATH": path_with_mpicxx, "HOROVOD_WITHOUT_MPI": "1"}
    ).build
    assert bootstrap.mpi_decision(
        "cpu", environ={"PATH": str(tmp_path), "HOROVOD_WITH_MPI": "1"}
    ).build


def test_exactly_one_mpi_flag_reaches_the_build():
    for build in (True, False):
        flags = bootstrap.wanted_state("gpu", bootstrap.MpiDecision(build, "test"))["horovod_build"]
        assert flags["HOROVOD_GPU_OPERATIONS"] == "NCCL"
        assert ("HOROVOD_WITH_MPI" in flags, "HOROVOD_WITHOUT_MPI" in flags) == (build, not build)


def test_installing_openmpi_later_does_not_rebuild_a_working_environment(path_with_mpicxx):
    """An environment built before OpenMPI was there stays up to date, and says how to add MPI."""
    stamp = gloo_only_stamp()
    kept = bootstrap.mpi_decision("cpu", stamp, environ={"PATH": path_with_mpicxx})
    assert not kept.build and "REBUILD_HOROVOD=1" in kept.reason
    state = bootstrap.wanted_state("cpu", kept)
    assert state["horovod_build"] == stamp["horovod_build"]
    assert bootstrap.stamp_matches({**state, "horovod_controllers": ["Gloo"]}, state)
    # Asked to rebuild, or when TensorFlow changed, it looks again and takes MPI.
    assert bootstrap.mpi_decision(
        "cpu", stamp, rebuild=True, environ={"PATH": path_with_mpicxx}
    ).build
    assert bootstrap.mpi_decision(
        "cpu", {**stamp, "horovod_inputs_sha256": "old"}, environ={"PATH": path_with_mpicxx}
    ).build


def test_only_a_finished_build_counts_as_cached(tmp_path):
    folder = tmp_path / "key"
    folder.mkdir()
    assert bootstrap.cached_wheel(folder) is None
    wheel = folder / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"")
    assert bootstrap.cached_wheel(folder) == wheel
    assert bootstrap.cached_wheel(tmp_path / "key.partial") is None
