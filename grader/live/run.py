"""Runs the learner's script for real: 2 workers, a few steps, then checks what the ranks did.

The script runs unchanged under the runner's horovodrun (Gloo), each worker through the probe
(grader/live/probe.py), on part of the committed sample with the smallest WideResNet (depth 4)
for one epoch of a few steps. From step 8 on, the same workers run it a second time, for one
more epoch, so that it resumes from the first run's checkpoint. The probe's records then show
the invariants of the steps done so far (grader/live/invariants.py).

While it runs, the records are watched: a rank that waits in a collective which another rank
went past can never be answered, so the run is stopped then and there and called a hang,
instead of waiting for the time limit. The time limit, an error or an interrupt stops every
process of the run (the runner sees to it).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from grader.names import Script
from grader.source import FileProblem, read_source
from grader.live.evidence import Evidence
from grader.live.invariants import FIRST_STEP, INVARIANTS, Setting, findings
from grader.live.outcome import doomed, judge
from grader.live.probe import PRIVATE_LOG_DIR_VARIABLE, PROBE_DIR_VARIABLE, SECOND_RUN_VARIABLE
from grader.live.report import not_run, run_result
from grader.report import Result
from grader.rules import RULES
from workbook.facts import LAST_STEP, LEARNER_SCRIPT_NAME
from workbook.paths import REPO

PROBE = Path(__file__).with_name("probe.py")
WORKERS = 2
# The hard limit for the whole check. A quiet 2-core machine needs about 30 s for the two runs
# of step 8 and later; a busy one twice that. A hang is stopped as soon as it shows.
TIMEOUT_S = 120
HANG_SHOWN_S = 8  # a rank waits in vain for this long: a hang (records settle within 1 s)
POLL_S = 0.5
BASE_LR = 0.0125
STEPS_PER_EPOCH = 8  # for one process; 4 for each of 2 workers once the steps are divided
RUN_ARGS = ["--data-dir", str(REPO / "data" / "sample"), "--train-images", "512",
            "--test-images", "128", "--depth", "4", "--width", "1", "--preset", "cpu",
            "--base-lr", str(BASE_LR), "--steps-per-epoch", str(STEPS_PER_EPOCH),
            "--epochs", "1"]  # fmt: skip
SECOND_RUN_ARGS = ["--epochs", "2"]  # one epoch more: resume from the first run's checkpoint
RESUME_STEP = 8  # from here on there is a second run
# Before step 9 every rank writes checkpoints: into one folder, they would clash.
ONE_WRITER_STEP = 9
STEP_RANGE = f"{FIRST_STEP}..{LAST_STEP}"


def run_step(
    step: int,
    path=LEARNER_SCRIPT_NAME,
    *,
    timeout: float = TIMEOUT_S,
    np: int = WORKERS,
    work_dir=None,
    quiet: bool = False,
) -> Result:
    """Runs the script at `path` on `np` workers and checks the invariants of steps 4..`step`.

    The run's files go to a new folder under `work_dir` (default: the system's temporary
    folder); it is deleted when the check passes, and kept, for its horovodrun.log, otherwise.
    """
    if step not in INVARIANTS:
        raise ValueError(f"step must be one of {STEP_RANGE}, not {step!r}")
    script = Path(path).resolve()
    try:
        refusal = _not_runnable(Path(path))
    except FileProblem as problem:
        return not_run(step, path, problem.message, workers=np, unreadable=problem.unreadable)
    if refusal:
        return not_run(step, path, refusal, workers=np)

    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"run-check-step{step:02d}-", dir=work_dir))
    records, log_dir = folder / "records", folder / "logs"
    records.mkdir()
    resume = step >= RESUME_STEP
    env = {PROBE_DIR_VARIABLE: str(records),
           PRIVATE_LOG_DIR_VARIABLE: "second" if step >= ONE_WRITER_STEP else "all"}  # fmt: skip
    if resume:
        env[SECOND_RUN_VARIABLE] = json.dumps(SECOND_RUN_ARGS)
    runs = 2 if resume else 1
    if not quiet:
        print(
            f"Running {script.name} on {np} workers for a few steps"
            f"{', twice' if resume else ''} (under a minute on 2 cores; stopped after "
            f"{timeout:g} s)...",
            flush=True,
        )
    try:
        run, stuck = _run_watched(script, log_dir, env, np, timeout, records, runs)
    except (OSError, ValueError, RuntimeError) as error:  # no horovodrun, a runner refusal...
        shutil.rmtree(folder, ignore_errors=True)
        return not_run(step, path, f"the run could not start: {error}", workers=np)
    evidence = Evidence.read(records, np)
    outcome = judge(run, evidence, np, timeout, stuck, runs)
    setting = Setting(
        np=np,
        base_lr=BASE_LR,
        steps_per_epoch=STEPS_PER_EPOCH,
        log_dir=str(log_dir),
        shared_log_dir=step >= ONE_WRITER_STEP,
        resumed=resume and bool(evidence.ranks(2)),
    )
    result = run_result(step, path, outcome, findings(evidence, setting, step),
                        seconds=run.wall_seconds, workers=np)  # fmt: skip
    if result.passed:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        result.run.log_path = str(run.log_path)
    return result


def _not_runnable(script: Path) -> str:
    """Why the script can't be run by this check yet ("" when it can); FileProblem when it
    can't even be read."""
    text = read_source(script)
    try:
        parsed = Script.from_text(text)
    except FileProblem as problem:
        return problem.message
    except RecursionError:
        return "the file is too deeply nested to read"
    try:
        initializes = RULES[1].check(parsed) is None
    except Exception:  # the static rule's bug must not stop the real run
        initializes = True
    if not initializes:
        return (
            "the script does not initialize Horovod yet (step 1); on 2 workers it would only "
            "train twice, side by side"
        )
    return ""


def _run_watched(script: Path, log_dir: Path, env: dict, np: int, timeout: float,
                 records: Path, runs: int):  # fmt: skip
    """Runs the probe under horovodrun; stops it early on a hang. (RunResult, hang or None)."""
    from workbook.runner import RunOptions, start_in_background  # here: the grader stays light

    command = [str(PROBE), str(script), *RUN_ARGS, "--log-dir", str(log_dir)]
    options = RunOptions(np=np, timeout=timeout, run_name=log_dir.parent.name, env=env,
                         cwd=script.parent, logs_root=log_dir.parent)  # fmt: skip
    run = start_in_background(command, options=options)
    stuck, since = None, None
    try:
        while not run.done:
            time.sleep(POLL_S)
            seen = doomed(Evidence.read(records, np), runs)
            if seen is None or seen != stuck:
                stuck, since = seen, time.monotonic()
            elif time.monotonic() - since >= HANG_SHOWN_S:
                return run.stop(), stuck
        return run.result(), None
    except BaseException:  # an interrupt (or anything): nothing of the run may go on
        run.stop()
        raise
