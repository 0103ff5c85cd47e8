"""Runs the learner's script for real: 2 workers, twice, then checks what the ranks did.

The script runs unchanged under the runner's horovodrun (Gloo), each worker through the probe
(grader/running/probe.py), on keyed data (grader/running/keyed_data.py) with the smallest WideResNet
(depth 4).
Two launches show every step at once, whichever step is asked for, in settings no constant a
learner may write in (0, 1, 2, 5, 32, 128, a preset's) can match:

- the first launch trains FIRST_EPOCHS epochs from scratch with the options in ASKED: a warmup
  of 3 epochs, then the full rate, then the drop, so the whole recipe shows; batches of 20 of
  160 images; GPUs are simulated (one per host), and the two workers are on two host names of
  this machine (TWO_HOSTS), one slot each, so rank and local rank differ: a GPU pinned or a
  shard taken by the wrong one shows;
- from step 8 on, the workers are launched again (new processes, as a real resume is) on one
  host with no GPU at all (a CPU-only laptop) and the script's own defaults, as the notebooks
  run it: only --epochs FINAL_EPOCHS, the model's size and the folders; rank 0 gets the same
  --log-dir: the script must go on from the first run's last checkpoint, into an epoch after
  its preset's rate drop;
- every other rank gets an empty --log-dir of its own in each run (as on another machine), so
  a second writer, and a rank that looks for checkpoints itself, show.

The probe's records then show the invariant of each step (grader/running/invariants/). The run
is never refused because the reading of the script disagrees: a script that never initializes
Horovod runs too, and shows it. Evidence that code other than the script made (another file
run or imported, model.fit called from elsewhere) earns nothing; a script that is a reference
script up to formatting is said so.

While it runs, the records are watched: a rank that waits in a collective which another rank
went past can never be answered, so the run is stopped then and there and called a hang,
instead of waiting for the time limit. The limits are on what the script does, not on how busy
the machine is (grader/running/run_clock.py): TIMEOUT_S counts only the time the machine let the
run's processes run, the run's processes may use `np` x that in CPU time, and a run in which
no rank gets further for STALL_S of that time is stopped. A run the machine cut (its wall
clock ran WALL_CAP times over, and a minute, before the run had its time; or a worker was
killed while the machine's memory ran out) is run again, alone (no other run check of this
machine beside it), before any verdict rests on it, and the result says so. An
error or an interrupt stops every process of the run (the runner sees to it).
"""

from __future__ import annotations

import ast
import fcntl
import functools
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from grader.reading.guard import reading_problem
from grader.reference import reference_path
from grader.report import FAILED, PASSED, Result
from grader.running.box_keeper import OUTPUT_CUT
from grader.running.evidence import Evidence
from grader.running.expected import preset_value
from grader.running.invariants import (
    FIRST_STEP,
    INVARIANTS,
    NOVOGRAD_STEP,
    RESUME_STEP,
    Setting,
    findings,
)
from grader.running.kept import keep_log, keep_run
from grader.running.keyed_data import write_keyed_data
from grader.running.outcome import UNFINISHED, doomed, outcome_of
from grader.running.probe import (
    PRIVATE_LOG_DIR_VARIABLE,
    PROBE_DIR_VARIABLE,
    RUN_NUMBER_VARIABLE,
    SIMULATED_GPUS_VARIABLE,
)
from grader.running.run_clock import RunClock
from grader.running.run_result import not_run, run_result
from workbook import estimates, prose
from workbook.facts import LAST_STEP, LEARNER_SCRIPT_NAME
from workbook.paths import SOLUTIONS_DIR

PROBE = Path(__file__).with_name("probe.py")
WORKERS = 2
# The limit for the whole check, both launches, in seconds the machine let the run run
# (grader/running/run_clock.py). A quiet 2-core machine needs about 15 s for the two (python -m
# bench run_profile). A hang is stopped as soon as it shows.
TIMEOUT_S = 120
# The wall clock may run this many times the limit, and a minute (horovodrun and TensorFlow
# start), before the machine cut the run.
WALL_CAP, WALL_SLACK_S = 6, 60
# The folder the script starts in, in the box: a file it writes by a relative name (its own CSV
# log) is written there, as in the learner's notebooks/ folder, not refused.
WORKING_FOLDER = "work"
STALL_S = 30  # no rank got any further for this long (counted): the run is stopped
HANG_SHOWN_S = 8  # a rank waits in vain for this long: a hang (records settle within 1 s)
POLL_S = 0.5
FIRST_EPOCHS, FINAL_EPOCHS = 5, 6
# The keyed data (grader/running/keyed_data.py): the second launch, on the script's defaults,
# trains on all of it (the cpu preset's batches of 64: 1 step per worker and epoch) and
# validates on all of it (batches of 32: 1 step per worker).
KEYED_TRAIN_IMAGES, KEYED_TEST_IMAGES = 192, 64
# The first launch's options, none of them a value a learner may write in: 160 images in
# batches of 20 make 4 steps per worker and epoch; the warmup takes epochs 1-3, the full rate
# epoch 4, and the rate drops (--lr-drops counts from 0) in epoch 5: the first launch shows the
# whole recipe, whatever becomes of the resume. The second launch trains epoch 6 with the
# preset's own drop (from epoch 4, counted from 1), the same rate: a schedule that drops again
# each epoch (a number for a multiplier) shows there. 48 test images in batches of 12: 2
# validation steps per worker, so a worker that validates its part twice shows. No --base-lr:
# the cpu preset's rate is step 12's to set.
ASKED = {
    "warmup_epochs": 3,
    "lr_drops": [4],
    "train_images": 160,
    "test_images": 48,
    "batch_size": 20,
    "val_batch_size": 12,
    "momentum": 0.9,
    "preset": "cpu",
    "epochs": FIRST_EPOCHS,
}
MODEL_ARGS = ["--depth", "4", "--width", "1"]  # the smallest WideResNet, in both launches
RUN_ARGS = [
    "--train-images",
    str(ASKED["train_images"]),
    "--test-images",
    str(ASKED["test_images"]),
    "--batch-size",
    str(ASKED["batch_size"]),
    "--val-batch-size",
    str(ASKED["val_batch_size"]),
    *MODEL_ARGS,
    "--preset",
    "cpu",
    "--momentum",
    "0.9",
    "--warmup-epochs",
    str(ASKED["warmup_epochs"]),
    "--lr-drops",
    *map(str, ASKED["lr_drops"]),
    "--epochs",
    str(FIRST_EPOCHS),
]
# The resume: the script's own defaults but the model's size and the epochs, as a notebook runs it.
SECOND_RUN_ARGS = [*MODEL_ARGS, "--epochs", str(FINAL_EPOCHS)]
# Two names of this machine, one worker each: rank 1 has local rank 0 (as the elastic lesson's
# runs do); Gloo talks over the loopback interface.
TWO_HOSTS = ["-H", "localhost:1,127.0.0.1:1", "--network-interfaces", "lo"]
FOLDER_PREFIX = "run-check-step"  # a run's folder: run-check-stepNN-XXXX
KEPT_S = 24 * 3600  # a failed run's folder (its log) is kept this long
# Every run check of this machine holds this file's lock, shared; a run re-run alone holds it
# alone, so that no other check runs beside it.
LOCK_PATH = Path(tempfile.gettempdir()) / "workbook-run-check.lock"
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
    then names that log. `timeout` counts the time the machine let the run run (see the
    module's text). A run the machine cut is run again, alone; result.run.reruns says why.
    `sandbox` (grader/running/sandbox.py), when given, confines the whole run.
    """
    if step not in INVARIANTS:
        raise ValueError(f"step must be one of {STEP_RANGE}, not {step!r}")
    problem = reading_problem(
        path
    )  # the static checker's guarded reading (grader/reading/guard.py)
    if problem is not None:
        return not_run(
            step,
            path,
            problem.message,
            workers=np,
            unreadable=problem.unreadable,
            file_problem=True,
        )

    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    # Before step 8 the ranks can't agree on a resume (and need not): one run shows the rest.
    runs = 2 if step >= RESUME_STEP else 1
    if not quiet:
        # How long, from this machine's measured speed and its load now (workbook.estimates).
        # Prose, wrapped between words (a notebook's plain output breaks lines inside them).
        prose.show(
            f"Running {Path(path).name} on {np} workers{', twice' if runs == 2 else ''} (a few "
            f"steps{', then a resume from its checkpoint' if runs == 2 else ''}; "
            f"{estimates.check_run(runs, timeout)})..."
        )
    say = None if quiet else lambda line: print(f"  {line}", flush=True)
    reruns = []
    try:
        attempt = _attempt_again_if_cut(
            step, Path(path), runs, np, timeout, work_dir, sandbox, say, reruns
        )
    except (OSError, ValueError, RuntimeError) as error:  # no horovodrun, a runner refusal...
        result = not_run(step, path, f"the run could not start: {error}", workers=np)
        result.run.reruns = reruns
        return result
    if attempt.cut:  # alone too: no verdict may rest on it
        shutil.rmtree(attempt.folder, ignore_errors=True)
        result = not_run(
            step,
            path,
            f"this machine was too busy to run the script, twice: {attempt.cut}",
            workers=np,
        )
        result.run.reruns = [*reruns, f"cut again: {attempt.cut}"]
        return result
    result = attempt_result(step, path, attempt, np, timeout, reruns)
    if result.passed and not keep:
        shutil.rmtree(attempt.folder, ignore_errors=True)
    else:
        result.run.log_path = str(attempt.run.log_path)
    return result


def _attempt_again_if_cut(
    step, path: Path, runs, np, timeout, work_dir, sandbox, say, reruns: list
) -> Attempt:
    """The run, and when the machine cut it, the run again alone (`reruns` says why)."""
    attempt = _attempt(step, path, runs, np, timeout, work_dir, sandbox, say)
    if attempt.cut:
        reruns.append(f"run again alone: {attempt.cut}")
        if say is not None:
            say(f"the machine held the run back; running it again, alone ({attempt.cut})")
        shutil.rmtree(attempt.folder, ignore_errors=True)
        attempt = _attempt(step, path, runs, np, timeout, work_dir, sandbox, say, alone=True)
    return attempt


def attempt_result(step: int, path, attempt: Attempt, np: int, timeout: float, reruns) -> Result:
    """The verdict on a run the machine let finish: how it ended and the invariants of steps
    1..`step` in what the ranks recorded."""
    run, records = attempt.run, attempt.folder / "kept" / "records"
    evidence = Evidence.read(records, np)
    outcome = outcome_of(run, evidence, np, timeout, attempt.stuck, attempt.number)
    if attempt.stopped and outcome.kind == UNFINISHED:
        where = outcome.message.split(": ", 1)[-1]
        outcome = replace(outcome, message=f"{attempt.stopped}: {where}", hint=attempt.stopped_hint)
    setting = Setting(
        np=np,
        log_dir=str(attempt.folder / "kept" / "logs"),
        first_epochs=FIRST_EPOCHS,
        final_epochs=FINAL_EPOCHS,
        asked=ASKED,
        sgd_preset_lr=preset_value(reference_path(NOVOGRAD_STEP - 1), ASKED["preset"], "base_lr"),
    )
    foreign = foreign_code(evidence)
    found = findings(evidence, setting, step)
    if foreign:
        found = [not_earned(finding, foreign) for finding in found]
    result = run_result(step, path, outcome, found, seconds=attempt.seconds, workers=np)
    result.run.reruns = reruns
    result.run.foreign = foreign
    result.run.copy_of = copy_of_reference(Path(path))
    if reruns:
        result.message += f"; {reruns[0]}"  # why the machine's cut made it run again alone
    if result.run.copy_of:
        result.message += f"; the script is {result.run.copy_of}, up to formatting"
    result.run.counted_seconds = round(attempt.clock.counted, 1)
    return result


@dataclass
class Attempt:
    """One go at the check: its launches, and how the last one ended."""

    folder: Path
    run: object  # the last launch's RunResult
    number: int  # how many launches started
    seconds: float  # their wall-clock time
    clock: RunClock
    stuck: str | None = None  # why the watcher stopped it as doomed (outcome.doomed)
    stopped: str = ""  # why the watcher stopped it at a limit of the script's own
    stopped_hint: str = ""
    cut: str = ""  # why the machine, not the script, cut it short ("" if it did not)


def _attempt(
    step: int,
    path: Path,
    runs: int,
    np: int,
    timeout: float,
    work_dir,
    sandbox,
    say,
    alone: bool = False,
) -> Attempt:
    """Both launches (or the first), in a new folder; alone: with no other check beside it."""
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{step:02d}-", dir=work_dir))
    _remove_old_runs(folder.parent)
    # The run writes only in box/ (in the sandbox, a tmpfs of its own); what the grader needs of
    # it is kept in kept/ by a bounded reader (grader/running/kept.py), the rest goes with the box.
    box, kept = folder / "box", folder / "kept"
    records, log_dir = box / "records", box / "logs"
    clock = RunClock()
    attempt = Attempt(folder, None, 0, 0.0, clock)
    try:
        records.mkdir(parents=True)
        (box / WORKING_FOLDER).mkdir()  # where the script starts: writable, goes with the box
        kept.mkdir()
        # The script alone, in a folder of its own: nothing else of the learner's folder (a
        # numpy.py beside it, say) is on the run's sys.path, or in its sandbox.
        (folder / "script").mkdir()
        script = Path(shutil.copyfile(path.resolve(), folder / "script" / path.name))
        data = write_keyed_data(folder / "data", KEYED_TRAIN_IMAGES, KEYED_TEST_IMAGES)
        env = {PROBE_DIR_VARIABLE: str(records), PRIVATE_LOG_DIR_VARIABLE: "all"}
        if sandbox is not None:  # the other ranks' own --log-dir folders are beside log_dir
            sandbox = sandbox.with_folders(writable=[box], readable=[data, script.parent])
        with _turn(alone):
            for number in range(1, runs + 1):
                launch = _launch(number, data, env)
                attempt.number = number
                _run_watched(script, log_dir, launch, np, timeout, records, attempt, sandbox, say)
                attempt.seconds += attempt.run.wall_seconds
                # Each launch's log, kept apart (the next launch writes the same file).
                keep_log(attempt.run.log_path, kept / f"launch-{number}.log")
                attempt.run.log_path = kept / f"launch-{number}.log"
                if sandbox is not None:
                    sandbox.end_launch()  # its cgroups; its files stay for the next launch
                    if attempt.stopped or attempt.run.timed_out:
                        sandbox.note("time")
                if attempt.stuck or attempt.stopped or attempt.cut or not attempt.run.ok:
                    break
        after_the_launches = time.monotonic()
        _keep(box, kept, log_dir.name, sandbox)
    except BaseException:  # preparing, running or reading: released, and nothing kept
        _release(folder, sandbox, everything=True)
        raise
    _release(folder, sandbox)
    # Reading what the run left and releasing its box count on its clock too: the time limit
    # covers the whole judgement (bounded by the box's caps: 0.25 s for a box of 23,618
    # entries and 48 MiB of records, six times the inodes a box may hold).
    reading = time.monotonic() - after_the_launches
    attempt.clock.counted += reading
    attempt.seconds += reading
    return attempt


def _keep(box: Path, kept: Path, log_dir_name: str, sandbox) -> None:
    """What the grader keeps of the run (grader/running/kept.py), read as data, bounded; a
    failure is this run's alone (RuntimeError: the run's result says why)."""
    try:
        keep_run(box, kept, log_dir_name)
    except Exception as error:  # noqa: BLE001 (whatever the run left there)
        raise RuntimeError(
            f"the run's records could not be read: {type(error).__name__}: {error}"
        ) from error
    if sandbox is not None:  # the grader's own bounded copies
        if any(OUTPUT_CUT.encode() in log.read_bytes() for log in kept.glob("launch-*.log")):
            sandbox.note("output")


def _release(folder: Path, sandbox, everything: bool = False) -> None:
    """Releases the run's box whatever happened: its cgroups, its tmpfs and what the script
    wrote there (nothing of it is copied back); then box/ and the keyed data go, and with
    `everything` (or when the release fails) the whole folder; else kept/ and the script's copy
    stay while the run's folder is kept."""
    try:
        if sandbox is not None:
            sandbox.close()
    except BaseException:
        everything = True
        raise
    finally:
        for made in ("box", "data") if not everything else ():
            shutil.rmtree(folder / made, ignore_errors=True)
        if everything:
            shutil.rmtree(folder, ignore_errors=True)


def _launch(number: int, data: Path, env: dict) -> Launch:
    """Launch 1: the check's options, simulated GPUs, two hosts; launch 2: the script's own
    defaults, no GPU, one host."""
    env = {**env, RUN_NUMBER_VARIABLE: str(number)}
    if number == 1:
        return Launch(
            number,
            [*RUN_ARGS, "--data-dir", str(data)],
            {**env, SIMULATED_GPUS_VARIABLE: "1"},
            TWO_HOSTS,
        )
    return Launch(number, [*SECOND_RUN_ARGS, "--data-dir", str(data)], env, [])


@contextmanager
def _turn(alone: bool):
    """This machine's run checks share it; one run alone waits for the others, and they for it."""
    with open(LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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
    """One launch of the workers: which run of the script, its options, its environment, and
    horovodrun's options that place the workers."""

    number: int
    args: list
    env: dict
    hosts: list


def _run_watched(
    script: Path,
    log_dir: Path,
    launch: Launch,
    np: int,
    timeout: float,
    records: Path,
    attempt: Attempt,
    sandbox=None,
    say=None,
) -> None:
    """Runs the probe under horovodrun and watches it; stops it early on a hang, at the
    script's own limits (the run's time, its CPU time, no progress), or when the machine cut
    it; notes how in `attempt`. `say`, when given, gets a line each time rank 0 gets further."""
    from workbook.runner import RunOptions, start_in_background  # here: the grader stays light

    command = [*launch.hosts, str(PROBE), str(script), *launch.args, "--log-dir", str(log_dir)]
    name = log_dir.parent.name + ("" if launch.number == 1 else f"-run{launch.number}")
    clock = attempt.clock
    wall_left = max(1.0, timeout * WALL_CAP + WALL_SLACK_S - clock.wall)
    options = RunOptions(
        np=np,
        timeout=wall_left,
        run_name=name,
        env=launch.env,
        cwd=log_dir.parent / WORKING_FOLDER,
        logs_root=log_dir.parent,
        sandbox=sandbox,
    )
    run = start_in_background(command, options=options)
    clock.start()
    stuck, since, shown, known = None, None, "", {}
    progress, still = _progress_mark(records), 0.0
    try:
        while not run.done:
            time.sleep(POLL_S)
            counted = clock.tick(_run_pids(run.plan.marker, known))
            evidence = Evidence.read(records, np)
            if say is not None and (words := _progress(evidence)) != shown:
                say(words)
                shown = words
            mark = _progress_mark(records)
            # The script's own stall counts from its start: a launch whose workers are slow to
            # start (a busy machine: the launcher still importing) has not stalled.
            started = evidence.ranks(launch.number)
            still = 0.0 if mark != progress or not started else still + counted
            progress = mark
            seen = doomed(evidence, launch.number)
            if seen is None or seen != stuck:
                stuck, since = seen, time.monotonic()
            elif time.monotonic() - since >= HANG_SHOWN_S:
                attempt.stuck = stuck
                break
            workers = {
                record.data.get("pid")
                for run_ in evidence.runs
                for record in evidence.ranks(run_).values()
            }
            stop = _over_a_limit(clock, timeout, np, still, workers)
            if stop and not started:
                attempt.cut = _never_started(clock)  # none of the script's code ran yet
                break
            if stop:
                attempt.stopped, attempt.stopped_hint = stop
                break
        else:
            attempt.run = run.result()
            if attempt.run.timed_out:  # the wall clock's cap, before the run had its time
                attempt.cut = _machine_cut(clock, timeout)
            elif not attempt.run.ok and _killed_for_memory(clock, records, np, sandbox):
                attempt.cut = (
                    f"a worker was killed without an error of its own while this "
                    f"machine's memory ran low ({clock.lowest_memory:.0%} left)"
                )
            return
        attempt.run = run.stop()
    except BaseException:  # an interrupt (or anything): nothing of the run may go on
        run.stop()
        raise


LIMIT_HINT = (
    "If a rank waits for the others, look for a collective or a number of steps that "
    "differs between ranks; a loop that never ends, or processes the script starts "
    "beside its workers, use the run's time too."
)


def _over_a_limit(clock: RunClock, timeout: float, np: int, still: float, workers=()):
    """(why, hint) when the run went over a limit of its own, else None. `workers`: the pids
    of the ranks' workers (the probe's records)."""
    others, beside = "", clock.others_cpu(workers)
    if beside > 0.25 * clock.cpu and beside > 5:
        others = (
            f"; {beside:.0f} s of it went to processes beside the workers "
            f"({clock.busiest_other(workers)})"
        )
    if clock.counted >= timeout:
        why = (
            f"the run did not finish within {timeout:g} s of the machine's time "
            f"({clock.wall:.0f} s on the clock, {clock.share_given():.0%} of them given to the "
            f"run; its processes used {clock.cpu:.0f} s of CPU time{others})"
        )
        return why, LIMIT_HINT
    if clock.cpu >= np * timeout:
        why = (
            f"the run's processes used {clock.cpu:.0f} s of CPU time, more than "
            f"{np * timeout:g} s for {np} workers{others}"
        )
        return why, LIMIT_HINT
    if still >= STALL_S:
        why = (
            f"no rank got any further for {STALL_S} s while the machine let it run "
            f"(the run's processes used {clock.cpu:.0f} s of CPU time{others})"
        )
        return why, LIMIT_HINT
    return None


LOW_MEMORY = 0.05  # the machine's memory available fell below this share: it may kill


def _killed_for_memory(clock: RunClock, records: Path, np: int, sandbox) -> bool:
    """A worker died without an error of its own (a kill), not at the box's memory limit,
    while the machine's memory ran low: the machine's out-of-memory killer, not the script."""
    if clock.lowest_memory >= LOW_MEMORY:
        return False
    if sandbox is not None and "memory" in getattr(sandbox, "hit", list)():
        return False  # the script's own limit: its own doing
    evidence = Evidence.read(records, np)
    current = {
        rank: record
        for run in sorted(evidence.runs)
        for rank, record in evidence.ranks(run).items()
    }
    return any(not record.finished and not record.error for record in current.values())


def _never_started(clock: RunClock) -> str:
    """Why a launch in which no worker started the script within the run's limits is the
    machine's (or the launcher's), not the script's: none of its code had run."""
    return (
        f"no worker started the script in {clock.wall:.0f} s on the clock ({clock.counted:.0f} s "
        f"of them the machine's time; the launch's processes used {clock.cpu:.0f} s of CPU time)"
    )


def _machine_cut(clock: RunClock, timeout: float) -> str:
    """Why the machine cut the run: in its wall time, the run had only part of its own."""
    return (
        f"in {clock.wall:.0f} s on the clock the machine gave the run only "
        f"{clock.counted:.0f} s of its {timeout:g} s ({clock.share_given():.0%}: other "
        f"processes held the cores for {clock.starved:.0f} s)"
    )


def _progress_mark(records: Path) -> tuple:
    """What changes whenever a rank gets further: the records' names, sizes and times."""
    try:
        return tuple(
            sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in records.glob("*.json"))
        )
    except OSError:
        return ()


def _run_pids(marker: tuple, known: dict) -> list:
    """The run's processes now: this process's descendants that carry the run's marker, and
    theirs (a process may clear its environment). `known`: {pid: carries}, kept between calls."""
    import psutil  # here: the grader stays light

    try:
        below = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    parents = {}
    for process in below:
        try:
            parents[process.pid] = process.ppid()
        except psutil.Error:
            continue
        if process.pid not in known:
            try:
                known[process.pid] = process.environ().get(marker[0]) == marker[1]
            except psutil.Error:
                known[process.pid] = False
    found = {pid for pid in parents if known.get(pid)}
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found and pid not in found}
        found |= more
        grew = bool(more)
    return sorted(found)


def _progress(evidence: Evidence) -> str:
    """How far rank 0 got, in words ("" before it reported)."""
    for run in sorted(evidence.runs, reverse=True):
        record = evidence.ranks(run).get(0)
        if record is not None:
            return f"{'second run, ' if run == 2 else ''}rank 0: {record.last_stage[1]}"
    return ""


# --- only the script's own code earns points ------------------------------------------------


def foreign_code(evidence: Evidence) -> list:
    """What ran in the workers that is not the script's own code (probe's "foreign"), once."""
    seen = []
    for run in sorted(evidence.runs):
        for _, record in sorted(evidence.ranks(run).items()):
            for what in record.data.get("foreign") or []:
                if what not in seen:
                    seen.append(what)
    return seen


def not_earned(finding: Result, foreign: list) -> Result:
    """A finding the script's own code did not show: a pass earns nothing."""
    if finding.status != PASSED:
        return finding
    return replace(
        finding,
        status=FAILED,
        message=f"not the script's own work: {foreign[0]}; only the script's own code "
        f"earns points (the run showed: {finding.message})",
    )


def _shape(text: str) -> str | None:
    """The script's code up to formatting: its syntax tree, without docstrings."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
            body.pop(0)
    return ast.dump(tree)


def copy_of_reference(path: Path) -> str:
    """The reference script (of a step after the start) that `path` is, up to formatting, or ""."""
    try:
        mine = _shape(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return ""
    if mine is None:
        return ""
    for step in range(LAST_STEP, 0, -1):
        if _reference_shape(step) == mine:
            return str(reference_path(step).relative_to(SOLUTIONS_DIR.parent))
    return ""


@functools.cache
def _reference_shape(step: int) -> str | None:
    try:
        return _shape(reference_path(step).read_text(encoding="utf-8"))
    except OSError:
        return None
