"""Real runs of tests/claims/two_workers.py's experiments under `horovodrun --gloo -np 2` on the
committed sample, and what rank 0 reports of them; shared by tests/smoke/test_schedule_claims.py
and tests/system/test_claims.py.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from processes import kill_group
from workbook.facts import with_safe_env
from workbook.paths import REPO

EXPERIMENTS = Path(__file__).resolve().parent / "claims" / "two_workers.py"
HOROVODRUN = Path(sys.executable).with_name("horovodrun")
SAMPLE = REPO / "data" / "sample"
CLAIM_LINE = re.compile(r"^\[0\]<stdout>:CLAIM (\w+) (.*)$", re.MULTILINE)
RUN_TIMEOUT = 300  # seconds for one horovodrun of many experiments (about 60 s on 2 cores)


needs_horovodrun_and_sample = [
    pytest.mark.skipif(not HOROVODRUN.is_file(), reason=f"no {HOROVODRUN}: make env"),
    pytest.mark.skipif(not (SAMPLE / "train.npz").is_file(), reason=f"no sample in {SAMPLE}"),
]


def worker_env() -> dict:
    env = with_safe_env()
    env.update(
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
    )
    env["PATH"] = os.pathsep.join([str(HOROVODRUN.parent), env.get("PATH", "")])
    return env


def start(names: list, log_path: Path) -> subprocess.Popen:
    command = [HOROVODRUN, "--gloo", "-np", "2", "-H", "localhost:2", sys.executable, EXPERIMENTS]
    # The workers' temporary files (checkpoints, TensorFlow's autograph sources) go to the
    # test's own folder, also when a hang is killed before they could remove them.
    env = {**worker_env(), "TMPDIR": str(log_path.parent)}
    with log_path.open("w") as log:
        return subprocess.Popen(
            [str(part) for part in command + names],
            cwd=log_path.parent,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen) -> None:
    """Kills the run with everything it started; conftest.py also kills whatever carries the
    test's marker."""
    kill_group(process)


def run_experiments(names: list, folder: Path) -> dict:
    """{experiment: the value rank 0 printed}, from one horovodrun of `names`."""
    log_path = folder / "horovodrun.log"
    process = start(names, log_path)
    try:
        process.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        stop(process)
        pytest.fail(f"timed out after {RUN_TIMEOUT} s:\n{log_path.read_text()[-5000:]}")
    output = log_path.read_text()
    assert process.returncode == 0, output[-5000:]
    claims = {name: json.loads(value) for name, value in CLAIM_LINE.findall(output)}
    assert sorted(claims) == sorted(names), output[-5000:]
    return claims


def close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-9)


def all_close(a: list, b: list) -> bool:
    return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))


def at(run: dict, key: str, epoch: int, batch: int = 0):
    """The value recorded at the start of `batch` of `epoch`."""
    return run[key][run["first_batches"][epoch] + batch]
