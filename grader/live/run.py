"""Runs the learner's script for real: 2 workers, twice, then checks what the ranks did.

The script runs unchanged under the runner's horovodrun (Gloo), each worker through the probe
(grader/live/probe.py), on keyed data (grader/live/keyed_data.py) with the smallest WideResNet
(depth 4).
One configuration shows every step at once, whichever step is asked for:

- the first run trains FIRST_EPOCHS epochs from scratch, with a warmup of one epoch, so that
  the warmup and the full rate both show; GPUs are simulated (one per worker), so that GPU
  pinning shows on a machine without them;
- from step 8 on, the workers are launched again (new processes, as a real resume is), asked
  for FINAL_EPOCHS, with the same --log-dir on rank 0: the script must go on from the first
  run's last checkpoint, into the epoch where the learning rate drops;
- every other rank gets an empty --log-dir of its own in each run (as on another machine), so
  a second writer, and a rank that looks for checkpoints itself, show.

The probe's records then show the invariant of each step (grader/live/invariants.py). The run
is never refused because the reading of the script disagrees: a script that never initializes
Horovod runs too, and shows it.

While it runs, the records are watched: a rank that waits in a collective which another rank
went past can never be answered, so the run is stopped then and there and called a hang,
instead of waiting for the time limit. The time limit, an error or an interrupt stops every
process of the run (the runner sees to it).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader.guard import reading_problem
from grader.live.evidence import Evidence
from grader.live.expected import preset_value
from grader.live.invariants import FIRST_STEP, INVARIANTS, NOVOGRAD_STEP, Setting, findings
from grader.live.keyed_data import write_keyed_data
from grader.live.outcome import doomed, judge
from grader.live.probe import (PRIVATE_LOG_DIR_VARIABLE, PROBE_DIR_VARIABLE, RUN_NUMBER_VARIABLE,
                               SIMULATED_GPUS_VARIABLE)  # fmt: skip
from grader.live.report import not_run, run_result
from grader.reference import reference_path
from grader.report import Result
from workbook.facts import LAST_STEP, LEARNER_SCRIPT_NAME

PROBE = Path(__file__).with_name("probe.py")
WORKERS = 2
# The hard limit for the whole check, both launches. A quiet 2-core machine needs about 13 s
# for the two (python -m bench run_profile); a busy one 2-4 times that. A hang is stopped as
# soon as it shows.
TIMEOUT_S = 120
HANG_SHOWN_S = 8  # a rank waits in vain for this long: a hang (records settle within 1 s)
POLL_S = 0.5
FIRST_EPOCHS, FINAL_EPOCHS = 2, 3
# The options the lesson's script takes, in the smallest form that still shows every step:
# 256 keyed images (grader/live/keyed_data.py) in batches of 32 make 4 steps per worker and
# epoch; the warmup takes epoch 1, the full rate epoch 2, and the rate drops in epoch 3
# (--lr-drops counts from 0). 64 test images in batches of 16: 2 validation steps per worker,
# so a worker that validates its part twice shows. No --base-lr: the cpu preset's rate is
# step 12's to set. --data-dir is the run's own keyed data.
ASKED = {"warmup_epochs": 1, "lr_drops": [2], "train_images": 256, "test_images": 64,
         "batch_size": 32, "val_batch_size": 16, "momentum": 0.9, "preset": "cpu"}  # fmt: skip
RUN_ARGS = ["--train-images", "256", "--test-images", "64", "--batch-size", "32",
            "--val-batch-size", "16", "--depth", "4", "--width", "1", "--preset", "cpu",
            "--momentum", "0.9", "--warmup-epochs", "1", "--lr-drops", "2",
            "--epochs", str(FIRST_EPOCHS)]  # fmt: skip
SECOND_RUN_ARGS = ["--epochs", str(FINAL_EPOCHS)]  # go on from the first run's checkpoint
RESUME_STEP = 8  # the step whose invariant needs the second run
FOLDER_PREFIX = "run-check-step"  # a run's folder: run-check-stepNN-XXXX
KEPT_S = 24 * 3600  # a failed run's folder (its log) is kept this long
STEP_RANGE = f"{FIRST_STEP}..{LAST_STEP}"


def run_step(
    step: int = LAST_STEP,
    path=LEARNER_SCRIPT_NAME,
    *,
    timeout: float = TIMEOUT_S,
    np: int = WORKERS,
    work_dir=None,
    quiet: bool = False,
    sandbox=None,
    keep: bool = False,
) -> Result:
    """Runs the script at `path` on `np` workers and checks the invariants of steps 1..`step`.

    The run's files go to a new folder under `work_dir` (default: the system's temporary
    folder); it is deleted when the check passes (unless `keep`), and kept, for its
    horovodrun.log, otherwise (for a day: a later check removes it); `result.run.log_path`
    then names that log.
    `sandbox` (grader/live/sandbox.py), when given, confines the whole run.
    """
    if step not in INVARIANTS:
        raise ValueError(f"step must be one of {STEP_RANGE}, not {step!r}")
    script = Path(path).resolve()
    problem = reading_problem(path)  # the static checker's guarded reading (grader/guard.py)
    if problem is not None:
        return not_run(step, path, problem.message, workers=np, unreadable=problem.unreadable,
                       file_problem=True)

    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{step:02d}-", dir=work_dir))
    _remove_old_runs(folder.parent)
    records, log_dir = folder / "records", folder / "logs"
    records.mkdir()
    # The script alone, in a folder of its own: nothing else of the learner's folder (a numpy.py
    # beside it, say) is on the run's sys.path, or in its sandbox.
    (folder / "script").mkdir()
    script = Path(shutil.copyfile(script, folder / "script" / script.name))
    data = write_keyed_data(folder / "data", ASKED["train_images"], ASKED["test_images"])
    env = {PROBE_DIR_VARIABLE: str(records), PRIVATE_LOG_DIR_VARIABLE: "all",
           SIMULATED_GPUS_VARIABLE: "1"}  # fmt: skip
    # Before step 8 the ranks can't agree on a resume (and need not): one run shows the rest.
    runs = 2 if step >= RESUME_STEP else 1
    if not quiet:
        print(
            f"Running {script.name} on {np} workers{', twice' if runs == 2 else ''} (a few "
            f"steps{', then a resume from its checkpoint' if runs == 2 else ''}; 10-40 s, "
            f"never more than {timeout:g} s)...",
            flush=True,
        )
    if sandbox is not None:  # the other ranks' own --log-dir folders are beside log_dir
        sandbox = sandbox.with_folders(writable=[folder])
    say = None if quiet else lambda line: print(f"  {line}", flush=True)
    deadline, seconds = time.monotonic() + timeout, 0.0
    try:
        for number in range(1, runs + 1):
            left = max(1.0, deadline - time.monotonic())
            args = [*RUN_ARGS, "--data-dir", str(data), *(SECOND_RUN_ARGS if number == 2 else [])]
            launch = Launch(number, args,
                            {**env, RUN_NUMBER_VARIABLE: str(number)})  # fmt: skip
            run, stuck = _run_watched(script, log_dir, launch, np, left, records, sandbox, say)
            seconds += run.wall_seconds
            if sandbox is not None:
                sandbox.close()  # its mounts (files kept) and cgroups, before the next launch
            if stuck or not run.ok:
                break
    except (OSError, ValueError, RuntimeError) as error:  # no horovodrun, a runner refusal...
        shutil.rmtree(folder, ignore_errors=True)
        return not_run(step, path, f"the run could not start: {error}", workers=np)
    evidence = Evidence.read(records, np)
    outcome = judge(run, evidence, np, timeout, stuck, number)
    setting = Setting(np=np, log_dir=str(log_dir), first_epochs=FIRST_EPOCHS,
                      final_epochs=FINAL_EPOCHS, asked=ASKED,
                      sgd_preset_lr=preset_value(reference_path(NOVOGRAD_STEP - 1),
                                                 ASKED["preset"], "base_lr"))  # fmt: skip
    result = run_result(step, path, outcome, findings(evidence, setting, step),
                        seconds=seconds, workers=np)  # fmt: skip
    if result.passed and not keep:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        result.run.log_path = str(run.log_path)
    return result


def _remove_old_runs(parent: Path) -> None:
    """Removes the folders of this check's runs kept (for their log) more than KEPT_S ago."""
    cutoff = time.time() - KEPT_S
    for old in parent.glob(f"{FOLDER_PREFIX}*"):
        try:
            if old.is_dir() and not old.is_symlink() and old.stat().st_mtime < cutoff:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue  # another check's, going away as we look


@dataclass
class Launch:
    """One launch of the workers: which run of the script, its options, its environment."""

    number: int
    args: list
    env: dict


def _run_watched(script: Path, log_dir: Path, launch: Launch, np: int, timeout: float,
                 records: Path, sandbox=None, say=None):  # fmt: skip
    """Runs the probe under horovodrun; stops it early on a hang. (RunResult, hang or None).
    `say`, when given, gets a line each time rank 0 gets further."""
    from workbook.runner import RunOptions, start_in_background  # here: the grader stays light

    command = [str(PROBE), str(script), *launch.args, "--log-dir", str(log_dir)]
    name = log_dir.parent.name + ("" if launch.number == 1 else f"-run{launch.number}")
    options = RunOptions(np=np, timeout=timeout, run_name=name, env=launch.env,
                         cwd=script.parent, logs_root=log_dir.parent, sandbox=sandbox)  # fmt: skip
    runs = launch.number
    run = start_in_background(command, options=options)
    stuck, since, shown = None, None, ""
    try:
        while not run.done:
            time.sleep(POLL_S)
            evidence = Evidence.read(records, np)
            if say is not None and (progress := _progress(evidence)) != shown:
                say(progress)
                shown = progress
            seen = doomed(evidence, runs)
            if seen is None or seen != stuck:
                stuck, since = seen, time.monotonic()
            elif time.monotonic() - since >= HANG_SHOWN_S:
                return run.stop(), stuck
        return run.result(), None
    except BaseException:  # an interrupt (or anything): nothing of the run may go on
        run.stop()
        raise


def _progress(evidence: Evidence) -> str:
    """How far rank 0 got, in words ("" before it reported)."""
    for run in sorted(evidence.runs, reverse=True):
        record = evidence.ranks(run).get(0)
        if record is not None:
            return f"{'second run, ' if run == 2 else ''}rank 0: {record.last_stage[1]}"
    return ""
