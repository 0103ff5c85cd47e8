"""Running the step chain's scripts for real, as the tests of both tiers do: the quick options,
the recorder (tests/helpers/run_chain_file.py, which writes per worker the trainable weights'
sha256, the checkpoints it saved and the epoch it resumed from) and the runner's way of starting
them (workbook.runner's plan_run and execute)."""

import json
import shutil
from pathlib import Path

import pytest

from authoring import chain as step_chain
from processes import run_script

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
SAMPLE = REPO / "data" / "sample"
RECORDER = Path(__file__).resolve().parent / "helpers" / "run_chain_file.py"
HOROVODRUN = shutil.which("horovodrun")

# A tiny WideResNet and a few steps: the point is that each script runs and behaves
# distributed, not that it learns much.
QUICK = [
    "--data-dir", str(SAMPLE),
    "--epochs", "2",
    "--steps-per-epoch", "8",
    "--train-images", "1024",
    "--test-images", "256",
    "--val-batch-size", "64",
    "--depth", "10",
    "--width", "1",
]  # fmt: skip
RUN_TIMEOUT = 240  # seconds for one horovodrun

needs_horovodrun = pytest.mark.skipif(
    HOROVODRUN is None,
    reason="horovodrun is not on PATH: put the environment's bin/ first on PATH (make test does)",
)
needs_sample = pytest.mark.skipif(
    not (SAMPLE / "train.npz").is_file(),
    reason=f"no sample data in {SAMPLE}: git checkout -- data/sample",
)


def script(step):
    return SOLUTIONS / step_chain.output_name(step)


QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # TensorFlow's C++ notes stay out of the output


def recorded(path, out_dir, log_dir, *args):
    """The recorder running `path` (its records in out_dir), quick, with its --log-dir."""
    return [RECORDER, out_dir, path, *QUICK, "--log-dir", log_dir, *args]


def run(command, cwd, np_=2, timeout=RUN_TIMEOUT):
    """Runs a script through the runner (np_ workers under horovodrun; 0: one plain process)
    to its end; returns (exit code, output)."""
    launcher = {"np": np_} if np_ else {"np": 1, "launcher": "python"}
    result, output = run_script(command, cwd / "runner-logs", timeout=timeout, cwd=cwd,
                                env=QUIET, **launcher)  # fmt: skip
    return result.exit_code, output


def records(out_dir, ranks):
    return {rank: json.loads((out_dir / f"rank{rank}.json").read_text()) for rank in ranks}
