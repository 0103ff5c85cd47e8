"""The environment set-up: idempotent, and precise when something is missing."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbook import bootstrap
from workbook.paths import REPO

THIS_ENV = Path(sys.prefix)


@pytest.mark.skipif(not (THIS_ENV / bootstrap.STAMP_NAME).exists(),
                    reason="tests are not running in an environment made by workbook.bootstrap")
def test_second_run_is_a_fast_no_op():
    device = json.loads((THIS_ENV / bootstrap.STAMP_NAME).read_text())["device"]
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "workbook.bootstrap", "--venv", str(THIS_ENV),
                             "--device", device], capture_output=True, text=True, cwd=REPO)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout
    assert elapsed < 10, f"a no-op set-up took {elapsed:.1f} s"


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
    assert bootstrap.wanted_state("cpu")["horovod_inputs_sha256"] != \
        before["horovod_inputs_sha256"]


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
