"""Every script of the step chain trains for real, on the committed sample, under horovodrun.

Slow (a few minutes on 2 CPU cores): the scripts run under
`horovodrun --gloo -np 2 -H localhost:2` with a tiny model and a few steps per epoch, through
tests/helpers/run_chain_file.py, which records per worker the trainable weights' sha256, the
checkpoints it saved and the epoch it resumed from. TensorBoard event file names carry the
writer's PID, which the recorder maps to a rank.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from authoring import chain as step_chain
from processes import kill_group
from workbook.facts import results, with_safe_env

pytestmark = pytest.mark.slow

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


def worker_env():
    """As in a kernel or terminal of `make lab`, whose environment keeps MPI from hanging."""
    env = with_safe_env()
    env.update(
        # Two workers on two cores: one thread each, or they fight over the cores.
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
    )
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def start(command, cwd, stdout=subprocess.PIPE):
    return subprocess.Popen(
        [str(part) for part in command],
        cwd=cwd,
        env=worker_env(),
        stdout=stdout,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def run(command, cwd, timeout=RUN_TIMEOUT):
    """Runs a command to its end; returns (exit code, output). Kills it all on timeout."""
    process = start(command, cwd)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        output, _ = process.communicate()
        pytest.fail(f"timed out after {timeout} s: {command}\n{output[-5000:]}")
    return process.returncode, output


def horovodrun(np_, path, out_dir, log_dir, *args):
    hosts = f"localhost:{np_}"
    return [
        HOROVODRUN, "--gloo", "-np", np_, "-H", hosts,
        sys.executable, RECORDER, out_dir, path, *QUICK, "--log-dir", log_dir, *args,
    ]  # fmt: skip


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


@needs_horovodrun
@needs_sample
# The solution's run is the one real 2-worker run of `make check`.
@pytest.mark.parametrize("step", [
    pytest.param(step, marks=[pytest.mark.check] if step == step_chain.LAST_STEP else [])
    for step in range(step_chain.LAST_STEP + 1)
])
def test_chain_script_runs_on_two_workers(step, tmp_path):
    out_dir, log_dir = tmp_path / "record", tmp_path / "logs"
    code, output = run(horovodrun(2, script(step), out_dir, log_dir), cwd=tmp_path)
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


@needs_sample
def test_starting_script_runs_as_a_single_process(tmp_path):
    code, output = run(
        [sys.executable, script(0), *QUICK, "--log-dir", tmp_path / "logs"], cwd=tmp_path
    )
    assert code == 0, output[-5000:]
    (result,) = results(output)
    assert set(result) >= {"test_loss", "test_accuracy", "train_seconds", "images_per_second"}
    assert sorted(p.name for p in (tmp_path / "logs").glob("checkpoint-*.h5")) == [
        "checkpoint-1.h5",
        "checkpoint-2.h5",
    ]
    assert "Trouser" in output  # the per-class report


@needs_horovodrun
@needs_sample
def test_starting_script_runs_under_horovodrun_with_one_worker(tmp_path):
    out_dir = tmp_path / "record"
    code, output = run(horovodrun(1, script(0), out_dir, tmp_path / "logs"), cwd=tmp_path)
    assert code == 0, output[-5000:]
    assert records(out_dir, [0])[0]["resume_from_epoch"] == 0
    assert len(results(output)) == 1


def test_missing_data_exits_with_the_fix(tmp_path):
    code, output = run(
        [sys.executable, script(0), "--data-dir", tmp_path / "nowhere"], cwd=tmp_path, timeout=120
    )
    assert code == 1
    message = output.strip().splitlines()[-1]
    assert "python -m workbook.fashion_data prepare" in message
    assert "--data-dir" in message and "sample" in message


def test_help_shows_the_defaults(tmp_path):
    code, output = run([sys.executable, script(step_chain.LAST_STEP), "--help"], cwd=tmp_path)
    assert code == 0, output
    for option in ["--preset", "--batch-size", "--warmup-epochs", "--steps-per-epoch"]:
        assert option in output
    assert "(default: 32)" in output
    assert "None" not in output


def wait_for_checkpoint(out_dir, epoch, process, timeout):
    """Waits until rank 0 has finished saving checkpoint-{epoch}.h5."""
    saves = out_dir / "rank0.saves.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if saves.is_file() and f"checkpoint-{epoch}.h5" in saves.read_text():
            return True
        time.sleep(0.1)
    return False


@needs_horovodrun
@needs_sample
def test_solution_resumes_on_every_worker_after_a_crash(tmp_path):
    log_dir = tmp_path / "logs"
    # Epochs long enough (a few seconds) that the crash comes before the next checkpoint.
    longer = ["--epochs", "3", "--steps-per-epoch", "64", "--train-images", "0"]
    solution = SOLUTIONS / "fashion_mnist_solution.py"

    # Output to a file: nobody reads a pipe while we wait, and a full pipe would block the run.
    with open(tmp_path / "first.log", "w") as log:
        command = horovodrun(2, solution, tmp_path / "first", log_dir, *longer)
        first = start(command, cwd=tmp_path, stdout=log)
        try:
            saved = wait_for_checkpoint(tmp_path / "first", 1, first, RUN_TIMEOUT)
        finally:
            kill_group(first)
    output = (tmp_path / "first.log").read_text()
    assert saved, "no epoch-1 checkpoint before the run ended:\n" + output[-5000:]
    checkpoints = sorted(p.name for p in log_dir.glob("checkpoint-*.h5"))
    assert checkpoints == ["checkpoint-1.h5"], "the crash came too late to test resuming"

    out_dir = tmp_path / "second"
    code, output = run(horovodrun(2, solution, out_dir, log_dir, *longer), cwd=tmp_path)
    assert code == 0, output[-5000:]
    by_rank = records(out_dir, [0, 1])
    assert [by_rank[rank]["resume_from_epoch"] for rank in (0, 1)] == [1, 1]
    assert by_rank[0]["weights_sha256"] == by_rank[1]["weights_sha256"]
    assert "Resuming from epoch 1" in output
    (result,) = results(output)
    assert result["resumed_from_epoch"] == 1
    assert (log_dir / "checkpoint-3.h5").is_file()


@needs_horovodrun
@needs_sample
def test_step_8_resumes_with_sgd_on_every_worker(tmp_path):
    # Step 8 resumes the SGD checkpoint on rank 0 only; the solution's NovoGrad is tested above.
    log_dir = tmp_path / "logs"
    code, output = run(
        horovodrun(2, script(8), tmp_path / "first", log_dir, "--epochs", "1"), tmp_path
    )
    assert code == 0, output[-5000:]
    code, output = run(horovodrun(2, script(8), tmp_path / "second", log_dir), cwd=tmp_path)
    assert code == 0, output[-5000:]
    by_rank = records(tmp_path / "second", [0, 1])
    assert [by_rank[rank]["resume_from_epoch"] for rank in (0, 1)] == [1, 1]
    assert by_rank[0]["weights_sha256"] == by_rank[1]["weights_sha256"]
    assert "Resuming from epoch 1" in output
