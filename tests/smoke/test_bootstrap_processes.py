"""The environment set-up run for real: a second run is a fast no-op, and the Horovod wheel cache
is keyed by the build (as the environment's Python reports it)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bootstrap import environment as bootstrap
from workbook.paths import REPO

THIS_ENV = Path(sys.prefix)


@pytest.mark.skipif(
    not (THIS_ENV / bootstrap.STAMP_NAME).exists(),
    reason="tests are not running in an environment made by bootstrap",
)
def test_second_run_is_a_fast_no_op():
    device = json.loads((THIS_ENV / bootstrap.STAMP_NAME).read_text())["device"]
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "bootstrap", "--venv", str(THIS_ENV), "--device", device],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout
    assert elapsed < 10, f"a no-op set-up took {elapsed:.1f} s"


def test_wheel_cache_is_keyed_by_the_build(tmp_path, monkeypatch):
    monkeypatch.setenv(bootstrap.WHEEL_CACHE_VARIABLE, str(tmp_path / "wheels"))
    with_mpi = bootstrap.wanted_state("cpu", bootstrap.MpiDecision(True, "test"))
    without = bootstrap.wanted_state("cpu", bootstrap.MpiDecision(False, "test"))
    this_env = Path(sys.prefix)
    first = bootstrap.wheel_cache_dir(this_env, with_mpi)
    assert first.parent == tmp_path / "wheels"
    assert bootstrap.wheel_cache_dir(this_env, with_mpi) == first
    assert bootstrap.wheel_cache_dir(this_env, without) != first
    gpu = bootstrap.wanted_state("gpu", bootstrap.MpiDecision(False, "test"))
    assert bootstrap.wheel_cache_dir(this_env, gpu) != bootstrap.wheel_cache_dir(this_env, without)
    # What the venv holds is part of the key: its TensorFlow and its Python.
    inputs = bootstrap.installed_build_inputs(this_env)
    assert inputs["python"] == sys.version.split()[0]
    assert any(name.lower().startswith("tensorflow") for name in inputs["tensorflow"])
