"""What the runner's system tests share: horovodrun present, quiet TensorFlow with this
environment first on PATH, and waiting for a condition with a bound."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent


def wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"waited {seconds} s for {what}")


@pytest.fixture
def quiet_tensorflow(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("PATH", os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]))


needs_horovodrun = pytest.mark.skipif(
    not (VENV_BIN / "horovodrun").exists() and shutil.which("horovodrun") is None,
    reason="horovodrun is not installed in this environment",
)
