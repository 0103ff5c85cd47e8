"""Scripts of the step chain train for real, on the committed sample, under horovodrun: those on
each side of a step that changes how the workers train together (SIDES_OF_EACH_CHANGE).

A few minutes on 2 CPU cores: the scripts run as the runner cell starts them
(workbook.runner's plan_run and execute: `horovodrun --gloo -np 2`, one thread per worker on 2
cores) with a tiny model and a few steps per epoch, through tests/helpers/run_chain_file.py,
which records per worker the trainable weights' sha256, the checkpoints it saved and the epoch
it resumed from. TensorBoard event file names carry the writer's PID, which the recorder maps
to a rank. Two tests start a script bare (--help, missing data), as a learner types it in a
terminal. The solution's own run is in tests/smoke/test_solution_trains.py (make check).
"""

import subprocess
import sys
import time

import psutil
import pytest

from authoring import chain as step_chain
from chain_runs import (
    QUICK,
    QUIET,
    RECORDER,
    RUN_TIMEOUT,
    SOLUTIONS,
    needs_horovodrun,
    needs_sample,
    recorded,
    records,
    run,
    script,
    trains_on_two_workers,
)
from processes import marked, raw_output, script_plan
from workbook.facts import results, with_safe_env
from workbook.runner.cell import BackgroundRun


def in_a_terminal(command, cwd, timeout=120):
    """`python script ...` as a learner types it in a terminal: (exit code, output). Left bare
    on purpose: what is tested is what the terminal shows, stdout and stderr in their order."""
    env = dict(with_safe_env(), TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return done.returncode, done.stdout


# The scripts on each side of the steps that change what trains_on_two_workers asserts: one
# printer from step 3 (2 and 4), one model from step 5 (4 and 5), one writer from step 9 (8 and
# 9). The solution's run (the last step's) is in make check: tests/smoke/test_solution_trains.py.
# make bench's grading runs every script of the chain, each judged step by step.
SIDES_OF_EACH_CHANGE = (2, 4, 5, 8, 9)


@needs_horovodrun
@needs_sample
@pytest.mark.parametrize("step", SIDES_OF_EACH_CHANGE)
def test_chain_script_runs_on_two_workers(step, tmp_path):
    trains_on_two_workers(step, tmp_path)


@needs_sample
def test_starting_script_runs_as_a_single_process(tmp_path):
    code, output = run([script(0), *QUICK, "--log-dir", tmp_path / "logs"], tmp_path, np_=0)
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
    code, output = run(recorded(script(0), out_dir, tmp_path / "logs"), tmp_path, np_=1)
    assert code == 0, output[-5000:]
    assert records(out_dir, [0])[0]["resume_from_epoch"] == 0
    assert len(results(output)) == 1


def test_missing_data_exits_with_the_fix(tmp_path):
    code, output = in_a_terminal(
        [sys.executable, script(0), "--data-dir", tmp_path / "nowhere"], cwd=tmp_path
    )
    assert code == 1
    message = output.strip().splitlines()[-1]
    assert "python -m workbook.fashion_data prepare" in message
    assert "--data-dir" in message and "sample" in message


def test_help_shows_the_defaults(tmp_path):
    code, output = in_a_terminal([sys.executable, script(step_chain.LAST_STEP), "--help"], tmp_path)
    assert code == 0, output
    for option in ["--preset", "--batch-size", "--warmup-epochs", "--steps-per-epoch"]:
        assert option in output
    assert "(default: 32)" in output
    assert "None" not in output


def wait_for_checkpoint(out_dir, epoch, run, timeout):
    """Waits until rank 0 has finished saving checkpoint-{epoch}.h5 (False: the run ended or
    the time is up first)."""
    saves = out_dir / "rank0.saves.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not run.done:
        if saves.is_file() and f"checkpoint-{epoch}.h5" in saves.read_text():
            return True
        time.sleep(0.1)
    return False


def crash_workers(plan):
    """SIGKILL to every worker of the run (the recorder's processes that carry its marker)."""
    for process in marked(*plan.marker):
        try:
            if str(RECORDER) in process.cmdline():
                process.kill()
        except psutil.NoSuchProcess:
            pass


@needs_horovodrun
@needs_sample
def test_solution_resumes_on_every_worker_after_a_crash(tmp_path):
    log_dir = tmp_path / "logs"
    # Epochs long enough (a few seconds) that the crash comes before the next checkpoint.
    longer = ["--epochs", "3", "--steps-per-epoch", "64", "--train-images", "0"]
    solution = SOLUTIONS / "fashion_mnist_solution.py"

    # Started by the runner in the background; after epoch 1 both workers crash (SIGKILL, no
    # chance to save anything), and the runner stops what is left of the run.
    plan = script_plan(
        recorded(solution, tmp_path / "first", log_dir, *longer),
        tmp_path / "runner-logs",
        timeout=RUN_TIMEOUT,
        cwd=tmp_path,
        env=QUIET,
    )
    first = BackgroundRun(plan)
    try:
        saved = wait_for_checkpoint(tmp_path / "first", 1, first, RUN_TIMEOUT)
        crash_workers(plan)
    finally:
        first.stop()
    output = raw_output(plan)
    assert saved, "no epoch-1 checkpoint before the run ended:\n" + output[-5000:]
    checkpoints = sorted(p.name for p in log_dir.glob("checkpoint-*.h5"))
    assert checkpoints == ["checkpoint-1.h5"], "the crash came too late to test resuming"

    out_dir = tmp_path / "second"
    code, output = run(recorded(solution, out_dir, log_dir, *longer), cwd=tmp_path)
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
    code, output = run(recorded(script(8), tmp_path / "first", log_dir, "--epochs", "1"), tmp_path)
    assert code == 0, output[-5000:]
    code, output = run(recorded(script(8), tmp_path / "second", log_dir), cwd=tmp_path)
    assert code == 0, output[-5000:]
    by_rank = records(tmp_path / "second", [0, 1])
    assert [by_rank[rank]["resume_from_epoch"] for rank in (0, 1)] == [1, 1]
    assert by_rank[0]["weights_sha256"] == by_rank[1]["weights_sha256"]
    assert "Resuming from epoch 1" in output
