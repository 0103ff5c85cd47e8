"""The input-pipeline script (solutions/bonus/input_pipeline.py) started with bad options ends
with one line and exit code 2.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workbook.facts import with_safe_env

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "solutions" / "bonus" / "input_pipeline.py"
SAMPLE = REPO / "data" / "sample"
VENV_BIN = Path(sys.executable).parent
# A few batches of each variant, a tiny model: seconds of work per worker.

# The RESULT of a real run (horovodrun --gloo -np 2, --train-images 1024 --batches 5
# --warmup-batches 1 --train-batches 2 --depth 10 --decode-cost 40, on a busy 2-core VM).

needs_sample = pytest.mark.skipif(
    not (SAMPLE / "train.npz").is_file(),
    reason=f"no sample data in {SAMPLE}: git checkout -- data/sample",
)


def environment() -> dict:
    # horovodrun and the workers come from this environment; TensorFlow's C++ notes stay out;
    # as in a kernel or terminal of `make lab`, MPI does not hang on TensorBoard's port.
    return dict(
        with_safe_env(),
        PATH=os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
    )


def in_a_terminal(args: list, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python input_pipeline.py args` as a learner types it in a terminal. Left bare on purpose:
    the bad-options tests check what the terminal shows, stderr apart from stdout."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment(),
        cwd=REPO,
    )


# --- fast: what the script shares with the solution, and its bad options ----------------------


@needs_sample
@pytest.mark.parametrize(
    "args, message",
    [
        (["--variants", "sequential,turbo"], r"unknown variant 'turbo'; choose from sequential"),
        (["--batches", "0"], r"--batches: must be at least 1, not 0"),
        (["--batches", "many"], r"--batches: 'many' is not a whole number"),
        (["--augment", "maybe"], r"--augment: invalid choice: 'maybe'"),
        (["--data-dir", "/nonexistent"], r"no /nonexistent/train\.npz: run `python -m workbook"),
        (["--train-images", "20"], r"20 images make fewer than one batch of 32 per worker"),
    ],
)
def test_bad_options_say_what_is_wrong_in_one_line(args, message):
    run = in_a_terminal(["--data-dir", str(SAMPLE), *args], timeout=300)
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and re.search(message, errors[0]), run.stderr
    assert "Traceback" not in run.stderr
    assert "RESULT" not in run.stdout
