"""The run-for-real check (grader/running/): the learner's script on 2 workers, and what the ranks did.

The reference scripts and broken variants of them (small text edits) run for real, on 2 Gloo
workers: each mistake is caught with its own message, within the time limit, and nothing of a
run is left afterwards, also after the time limit or an interrupt. Records judged without a
run: tests/unit/test_run_check_records.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from grader.report import FAILED, PASSED, Result
from grader.running import run_step
from grader.running.invariants import finding
from grader.running.outcome import CRASHED, FINISHED, HUNG, UNFINISHED
from grader.running.probe import PROBE_DIR_VARIABLE
from grader.running.run_check import TIMEOUT_S
from workbook.facts import LAST_STEP
from workbook.paths import REPO

SOLUTIONS = REPO / "solutions"


def reference(step: int) -> Path:
    return SOLUTIONS / (
        "fashion_mnist_solution.py"
        if step == LAST_STEP
        else f"fashion_mnist_after_step_{step:02d}.py"
    )


# --- records as the probe writes them ------------------------------------------------------


# --- how a run ended --------------------------------------------------------------------------


@pytest.mark.timeout(400)
def test_a_script_without_horovod_runs_and_fails_every_step(tmp_path):
    """The run is never refused because of the reading: the starting script shows each step
    undone, by what its ranks did."""
    result = checked(SOLUTIONS / "fashion_mnist.py", 12, tmp_path)
    assert result.run.outcome == FINISHED and set(statuses(result).values()) == {FAILED}
    assert "Horovod was not initialized on ranks 0 and 1" in detail(result, 1).message
    assert "never chose a GPU" in detail(result, 2).message  # which rank: the launch's hosts
    assert "rank 1 printed too" in detail(result, 3).message


def variant(tmp_path: Path, step: int, old: str, new: str) -> Path:
    """The reference after `step` with one small edit: a learner's mistake."""
    text = reference(step).read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path = tmp_path / "fashion_mnist.py"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def probe_processes(folder: Path) -> list:
    """The live processes of runs whose records go under `folder`."""
    found = []
    for process in psutil.process_iter():
        try:
            if str(folder) in process.environ().get(PROBE_DIR_VARIABLE, ""):
                found.append(process)
        except psutil.Error:
            pass
    return found


def checked(path: Path, step: int, tmp_path: Path, **options) -> Result:
    started = time.monotonic()
    result = run_step(step, path, work_dir=tmp_path, quiet=True, **options)
    took = time.monotonic() - started
    print(f"step {step} of {path.name}: {took:.0f} s\n{result}")
    assert took < options.get("timeout", TIMEOUT_S) + 30  # the limit, and the clean-up
    assert not probe_processes(tmp_path)
    return result


def statuses(result: Result) -> dict:
    return {finding.step: finding.status for finding in result.details}


def detail(result: Result, step: int) -> Result:
    return next(finding for finding in result.details if finding.step == step)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("step", [4, 12])
def test_the_reference_passes(tmp_path, step):
    result = checked(reference(step), step, tmp_path)
    assert result.passed and result.run.outcome == FINISHED, str(result)
    assert set(statuses(result).values()) == {PASSED}, str(result)
    assert not list(tmp_path.iterdir())  # a passed check leaves no files


@pytest.mark.timeout(400)
def test_an_unwrapped_optimizer_gives_different_updates(tmp_path):
    path = variant(tmp_path, 4, "    opt = hvd.DistributedOptimizer(opt)\n", "")
    result = checked(path, 4, tmp_path / "runs")
    assert result.run.outcome == FINISHED and statuses(result)[4] == FAILED
    message = detail(result, 4).message
    assert "rank 0 and rank 1 changed their weights differently" in message
    assert "a plain SGD, not wrapped" in message


@pytest.mark.timeout(400)
def test_a_missing_broadcast_gives_different_weights(tmp_path):
    path = variant(tmp_path, 5, "    hvd.callbacks.BroadcastGlobalVariablesCallback(0),\n", "")
    result = checked(path, 5, tmp_path / "runs")
    assert statuses(result)[4] == PASSED and statuses(result)[5] == FAILED, str(result)
    assert "the weights of rank 1 differ from rank 0's" in detail(result, 5).message
    assert Path(result.run.log_path).is_file()  # kept, to look into


@pytest.mark.timeout(400)
def test_an_unsharded_dataset_gives_the_same_batches(tmp_path):
    shard = "train_dataset = train_dataset.shard(hvd.size(), hvd.rank())\n"
    result = checked(variant(tmp_path, 6, shard, ""), 6, tmp_path / "runs")
    assert [statuses(result)[step] for step in (4, 5, 6)] == [PASSED, PASSED, FAILED], str(result)
    assert "rank 0 and rank 1 both trained on" in detail(result, 6).message


@pytest.mark.timeout(400)
def test_a_collective_under_a_rank_branch_is_a_hang(tmp_path):
    broadcast = (
        "resume_from_epoch = int(hvd.broadcast(resume_from_epoch, root_rank=0, "
        'name="resume_from_epoch"))'
    )
    path = variant(tmp_path, 8, broadcast, f"if hvd.rank() == 0:\n    {broadcast}")
    line = 1 + path.read_text().splitlines().index(f"    {broadcast}")
    result = checked(path, 8, tmp_path / "runs")
    assert result.run.outcome == HUNG and not result.passed
    assert result.message.startswith(f"the run hung: rank 0 waits in hvd.broadcast at line {line}")
    assert "which rank 1 went past without calling it: rank 1 was training in model.fit" in (
        result.message
    )
    assert "Every rank must reach it" in result.hint
    assert result.run.seconds < TIMEOUT_S / 2  # seen and stopped, not waited out


@pytest.mark.timeout(400)
def test_a_resume_epoch_found_on_every_rank_apart_is_caught(tmp_path):
    """Step 7's script resumes where each rank's own --log-dir says: rank 1's has nothing."""
    result = checked(reference(7), 8, tmp_path)
    assert statuses(result)[8] == FAILED, str(result)
    assert "rank 0 resumed after epoch 5, rank 1 started from scratch" in detail(result, 8).message
    assert result.run.outcome == HUNG and "train different numbers of steps" in result.message
    assert result.run.seconds < TIMEOUT_S / 2  # seen and stopped, not waited out


@pytest.mark.timeout(400)
def test_a_crash_names_the_failing_rank(tmp_path):
    fit = "start = time.perf_counter()\n"
    crash = 'if hvd.rank() == 1:\n    raise RuntimeError("rank 1 gives up")\n'
    path = variant(tmp_path, 4, fit, crash + fit)
    line = 1 + path.read_text().splitlines().index('    raise RuntimeError("rank 1 gives up")')
    result = checked(path, 4, tmp_path / "runs")
    assert result.run.outcome == CRASHED
    assert result.message.startswith(
        f"rank 1 stopped with an error at line {line} (`raise "
        f'RuntimeError("rank 1 gives up")`): RuntimeError: rank 1 '
        "gives up ("
    )
    error = result.run.error
    assert "RuntimeError: rank 1 gives up" in error
    assert "probe.py" not in error and "runpy" not in error  # the learner's frames


@pytest.mark.timeout(400)
def test_the_time_limit_stops_everything_and_claims_no_hang(tmp_path):
    # 3 s: horovodrun and TensorFlow start more slowly than that (a quiet machine trains this
    # in 10 s).
    result = checked(reference(7), 7, tmp_path, timeout=3)
    assert result.run.outcome == UNFINISHED and "did not finish within 3 s" in result.message
    assert "hung" not in result.message


def training(records: Path) -> str:
    """Rank 1's record of the first run, as text ("" before it starts)."""
    found = list(records.glob("*/box/records/run1-rank1.json"))  # the run writes in its box
    return found[0].read_text() if found else ""


@pytest.mark.timeout(400)
def test_an_interrupt_stops_every_worker(tmp_path):
    # Each epoch's end waits: the interrupt comes while the workers train, at any load (a
    # busy machine's poll of the records saw model.fit start only after the tiny run ended).
    script = variant(
        tmp_path,
        5,
        "callbacks = [",
        "callbacks = [tf.keras.callbacks.LambdaCallback(on_epoch_end=lambda *_: time.sleep(20)), ",
    )
    records = tmp_path / "runs"
    records.mkdir()
    env = dict(os.environ, TMPDIR=str(records))
    command = [sys.executable, "-m", "grader", "run", str(script), "--step", "5"]
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while "started model.fit" not in training(records):  # interrupt it while it trains
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.5)
        assert probe_processes(records)  # the workers are running
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, output
    assert "interrupted; every worker of the run was stopped" in output
    assert "Traceback" not in output
    assert not probe_processes(records)


@pytest.mark.timeout(300)
def test_a_launch_whose_workers_never_start_the_script_is_the_machines_not_the_scripts(
    monkeypatch, tmp_path
):
    """Issue 37 (2): workers that never reach the script within the run's limits (here: a probe
    that only sleeps) are not the script's stall or its time: the run is cut, run again alone,
    and then not run at all, saying why."""
    from grader.running import run_check as live_run
    from grader.running.outcome import NOT_RUN

    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(120)\n")
    monkeypatch.setattr(live_run, "PROBE", sleeper)
    result = checked(reference(1), 1, tmp_path / "runs", timeout=6)
    assert result.run.outcome == NOT_RUN, result.message
    assert "too busy to run the script, twice: no worker started the script" in result.message
    assert result.run.reruns[0].startswith("run again alone: no worker started the script")
