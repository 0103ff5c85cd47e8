"""Running the step chain's scripts for real, as the tests of both tiers do: the quick options,
the recorder (tests/helpers/run_chain_file.py, which writes per worker the trainable weights'
sha256, the checkpoints it saved and the epoch it resumed from) and the runner's way of starting
them (workbook.runner's plan_run and execute)."""

import json
import re
import shutil
from pathlib import Path

import pytest

from authoring import chain as step_chain
from processes import run_script
from workbook.facts import results

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
SAMPLE = REPO / "data" / "sample"
RECORDER = Path(__file__).resolve().parent / "helpers" / "run_chain_file.py"
HOROVODRUN = shutil.which("horovodrun")

# A tiny WideResNet and a few steps: the point is that each script runs and behaves
# distributed, not that it learns much.
QUICK = [
    "--data-dir",
    str(SAMPLE),
    "--epochs",
    "2",
    "--steps-per-epoch",
    "8",
    "--train-images",
    "1024",
    "--test-images",
    "256",
    "--val-batch-size",
    "64",
    "--depth",
    "10",
    "--width",
    "1",
]
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
    result, output = run_script(
        command, cwd / "runner-logs", timeout=timeout, cwd=cwd, env=QUIET, **launcher
    )
    return result.exit_code, output


def records(out_dir, ranks):
    return {rank: json.loads((out_dir / f"rank{rank}.json").read_text()) for rank in ranks}


def checkpoint_ranks(out_dir):
    ranks = set()
    for path in out_dir.glob("rank*.saves.jsonl"):
        ranks |= {json.loads(line)["rank"] for line in path.read_text().splitlines()}
    return ranks


def event_file_ranks(log_dir, records_by_rank):
    rank_of_pid = {record["pid"]: rank for rank, record in records_by_rank.items()}
    ranks = set()
    for path in Path(log_dir).rglob("events.out.tfevents.*"):
        pid = int(re.search(r"\.(\d+)\.\d+\.v2$", path.name).group(1))
        assert pid in rank_of_pid, f"{path.name} was written by an unknown process"
        ranks.add(rank_of_pid[pid])
    return ranks


def trains_on_two_workers(step, tmp_path):
    """The script after `step` of the chain trains on 2 workers as far as that step makes it:
    one model from step 5, one writer from step 9, one printer from step 3."""
    out_dir, log_dir = tmp_path / "record", tmp_path / "logs"
    code, output = run(recorded(script(step), out_dir, log_dir), cwd=tmp_path)
    assert code == 0, output[-5000:]
    by_rank = records(out_dir, [0, 1])

    same_weights = by_rank[0]["weights_sha256"] == by_rank[1]["weights_sha256"]
    if step >= 5:
        # Broadcast initial weights + averaged gradients: the workers train one model.
        assert same_weights, "the workers' models diverged"
    else:
        # Separate random initializations: the workers train different models (even with
        # the averaged gradients of step 4, since nothing makes them start alike).
        assert not same_weights, "the workers ended with identical weights"

    writers = {0} if step >= 9 else {0, 1}
    assert checkpoint_ranks(out_dir) == writers
    assert event_file_ranks(log_dir, by_rank) == writers

    printed = results(output)
    assert len(printed) == (1 if step >= 3 else 2), output[-3000:]
    assert all(0 <= result["test_accuracy"] <= 1 for result in printed)
    assert all(result["epochs"] == 2 for result in printed)
