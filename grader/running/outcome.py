"""How a run of the check ended: finished, crashed (whose error), hung (who waits where), or slow.

A hang is said only with evidence: a rank waits in a collective (hvd.broadcast, allreduce...)
at a line of the script that another rank has already gone past, so the two can never meet.
A run stopped by the time limit without such evidence is called unfinished, with where each
rank was, never a hang.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grader.report import FINISHED
from grader.running.evidence import Evidence, RankRecord, line_and_code, split_by_callback

# How a run ended (grader.report.Run.outcome); FINISHED is grader.report's, which renders it.
CRASHED, HUNG, UNFINISHED = "crashed", "hung", "unfinished"
NOT_RUN = "not run"  # refused or failed to start: unreadable, no Horovod yet, no horovodrun


@dataclass
class Outcome:
    kind: str  # FINISHED, CRASHED, HUNG or UNFINISHED (grader.report.Run.outcome)
    message: str
    hint: str = ""
    error: str = ""  # the failing rank's error output
    line: int | None = None  # the script's line where it crashed or waits in vain
    code: str = ""
    resumed: bool = False  # ended early in the second run (the resume)
    exception: str = ""  # the failing rank's "Type: message"
    culprit: dict | None = None  # what the failing library frame worked on (probe.failing_object)


def _current(evidence: Evidence) -> dict:
    """{rank: (run, its record)} of the last run each rank started."""
    current = {}
    for run in sorted(evidence.runs):
        for rank, record in evidence.ranks(run).items():
            current[rank] = (run, record)
    return current


def _progress(run: int, record: RankRecord):
    """(run, line) of how far a rank is, comparable between ranks; None if unknown."""
    position = record.position()
    return None if position is None else (run, position)


def stuck_collective(evidence: Evidence, runs: int) -> str | None:
    """Who waits for whom in vain, in words, or None when no rank provably does.

    `runs` is how many runs of the script each rank makes: a rank that finished its last one
    is past every line.
    """
    current = _current(evidence)
    for rank, (run, record) in sorted(current.items()):
        waiting = record.waiting
        if not waiting or record.position() is None:
            continue
        here = (run, record.position())
        for other, (other_run, other_record) in sorted(current.items()):
            if other == rank:
                continue
            there = _progress(other_run, other_record)
            if other_record.finished and other_run < runs:
                there = None  # between two runs: on its way to the second one
            if there is None or there <= here:
                continue
            second = " of the second run" if run == 2 else ""
            return (
                f"rank {rank} waits in {waiting['call']}{line_and_code(waiting)}{second}, which "
                f"rank {other} went past without calling it: rank {other} "
                f"{other_record.where()}"
            )
    return None


def _training_steps(fit: dict) -> int | None:
    """How many steps model.fit trains: (epochs - initial_epoch) * steps_per_epoch."""
    steps = fit.get("steps_per_epoch")
    if not isinstance(steps, int):
        return None
    return max(0, fit.get("epochs", 1) - (fit.get("initial_epoch") or 0)) * steps


def mismatched_training(evidence: Evidence) -> str | None:
    """Ranks in the same model.fit that train different numbers of steps, in words, or None.

    Every step averages the gradients of all ranks: the rank with more steps would wait
    forever for the others' (or fail once they have ended).
    """
    current = _current(evidence)
    training = {rank: (run, record) for rank, (run, record) in current.items() if record.in_fit}
    if len(training) < evidence.np or len({run for run, _ in training.values()}) > 1:
        return None
    steps = {rank: _training_steps(record.fit) for rank, (_, record) in training.items()}
    if None in steps.values() or len(set(steps.values())) == 1:
        return None

    def what(rank):
        epoch = training[rank][1].fit.get("initial_epoch") or 0
        start = f"after epoch {epoch}" if epoch else "from the start"
        return f"rank {rank} {steps[rank]} ({start})"

    return (
        "the ranks train different numbers of steps in model.fit: "
        + ", ".join(what(rank) for rank in sorted(steps))
        + "; every step averages the gradients of all ranks, so one rank would wait forever "
        "for the others"
    )


# Horovod's callbacks that call a collective: every rank must pass them, or the others wait.
COLLECTIVE_CALLBACKS = ("BroadcastGlobalVariablesCallback", "MetricAverageCallback")


def mismatched_callbacks(evidence: Evidence) -> str | None:
    """Ranks in the same model.fit with and without one of COLLECTIVE_CALLBACKS, in words."""
    current = _current(evidence)
    training = {rank: (run, record) for rank, (run, record) in current.items() if record.in_fit}
    if len(training) < evidence.np or len({run for run, _ in training.values()}) > 1:
        return None
    fits = {rank: record.fit for rank, (_, record) in training.items()}
    for callback in COLLECTIVE_CALLBACKS:
        having, others = split_by_callback(fits, callback)
        if having and others:
            return (
                f"rank {having[0]} passed hvd.callbacks.{callback} to model.fit and rank "
                f"{others[0]} did not; it waits for every rank"
            )
    return None


def doomed(evidence: Evidence, runs: int) -> str | None:
    """Why this run can never finish well, in a sentence, or None."""
    stuck = stuck_collective(evidence, runs)
    if stuck:
        return f"the run hung: {stuck}"
    mismatch = mismatched_training(evidence) or mismatched_callbacks(evidence)
    return f"the run was stopped, as it could never finish: {mismatch}" if mismatch else None


def _where_all(evidence: Evidence, np: int) -> str:
    current = _current(evidence)
    parts = []
    for rank in range(np):
        if rank not in current:
            parts.append(f"rank {rank} had not started the script")
            continue
        run, record = current[rank]
        second = " (second run)" if run == 2 else ""
        parts.append(f"rank {rank}{second} {record.where()}")
    return "; ".join(parts)


HANG_HINT = (
    "A collective (hvd.broadcast, hvd.allreduce, every training step's gradient average...) "
    "returns only once every rank has called it. Is one under `if hvd.rank() == 0:`, or after "
    "a condition that differs between ranks? Every rank must reach it, as often as the others."
)


def outcome_of(
    run, evidence: Evidence, np: int, timeout: float, stuck: str | None, runs: int
) -> Outcome:
    """The outcome of a finished RunResult; `stuck` is why the watcher stopped it (doomed())."""
    stuck = stuck or doomed(evidence, runs)
    if stuck:
        waiting = (
            next(
                (record.waiting for _, record in _current(evidence).values() if record.waiting),
                None,
            )
            or {}
        )
        resumed = any(run == 2 for run, _ in _current(evidence).values())
        return Outcome(
            HUNG,
            stuck,
            HANG_HINT,
            line=waiting.get("line"),
            code=waiting.get("code") or "",
            resumed=resumed,
        )
    if run.timed_out:
        return Outcome(
            UNFINISHED,
            f"the run did not finish within {timeout:g} s: {_where_all(evidence, np)}",
            "If a rank waits for the others, look for a collective or a number of steps that "
            "differs between ranks; if the machine is busy, run the check again.",
        )
    if run.interrupted:
        return Outcome(UNFINISHED, f"the run was stopped: {_where_all(evidence, np)}")
    if not run.ok and not evidence.runs:  # no worker started the probe: this machine's fault
        lines = run.error.strip().splitlines()
        return Outcome(
            NOT_RUN,
            f"the workers never started: {lines[-1] if lines else run.status()}",
            error=run.error,
        )
    if not run.ok:
        return _crash(run, evidence)
    missing = [
        rank for rank in range(np) if not any(rank in evidence.ranks(r) for r in evidence.runs)
    ]
    if missing:
        return Outcome(CRASHED, f"rank {missing[0]} never started the script (see {run.log_path})")
    return Outcome(FINISHED, "")


def _crash(run, evidence: Evidence) -> Outcome:
    current = _current(evidence)
    failed = run.failed_rank
    errors = {rank: (r, record.error) for rank, (r, record) in current.items() if record.error}
    if failed not in errors and errors:
        failed = min(errors)  # the runner could not tell; the probe caught one
    if failed in errors:
        number, error = errors[failed]
        second = " in the second run" if number == 2 else ""
        what = f"{error['type']}: {error['message']}" if error.get("message") else error["type"]
        script = current[failed][1].data.get("script", "")
        culprit = error.get("culprit") or _wrapper_mismatch(error, current)
        return Outcome(
            CRASHED,
            f"{_who_crashed(errors, failed, evidence.np)} stopped with an error"
            f"{line_and_code(error)}{second}"
            f"{_in_culprit(culprit)}: {what}",
            error=from_the_script_on(run.error, script),
            line=error.get("line"),
            code=error.get("code") or "",
            resumed=number == 2,
            exception=what,
            culprit=culprit,
        )
    lines = run.error.strip().splitlines()
    last = lines[-1] if lines else run.status()
    who = f"rank {failed}" if failed is not None else "the run"
    return Outcome(CRASHED, f"{who} failed: {last}", error=run.error)


# Horovod's words when the ranks' allreduces of one tensor differ in what the script's
# hvd.DistributedOptimizer(...) call chose: its op, its gradient scaling.
WRAPPER_MISMATCH = re.compile(r"Mismatched (reduction operation|prescale and/or postscale factors)")


def _wrapper_mismatch(error: dict, current: dict) -> dict | None:
    """The optimizer wrapper a rank's script built (the probe's `wrapped_at`), as the culprit,
    when Horovod said the ranks' gradient allreduces differ in what that call chose (op=hvd.Sum
    on the rank that builds its optimizer, Average on the one whose hvd.load_model wrapped it):
    the failing rank may be one that never called it. Else None."""
    if not WRAPPER_MISMATCH.search(error.get("message") or ""):
        return None
    for _, record in (current[rank] for rank in sorted(current)):
        built = record.data.get("wrapped_at") or {}
        if built.get("line"):
            return {"kind": "optimizer wrapper", "class": "DistributedOptimizer", **built}
    return None


def _who_crashed(errors: dict, failed: int, np: int) -> str:
    """`rank 1`, or `every rank` / `ranks 0 and 2` when more ranks of the same run stopped with
    the same error at the same line (a walk saw one check name rank 0 and the next rank 1 for
    the same crash, as one or the other was caught first)."""
    number, error = errors[failed]
    same = sorted(
        rank
        for rank, (run, other) in errors.items()
        if run == number
        and [other.get(k) for k in ("type", "message", "line")]
        == [error.get(k) for k in ("type", "message", "line")]
    )
    if len(same) < 2:
        return f"rank {failed}"
    if len(same) == np:
        return "every rank"
    return f"ranks {', '.join(map(str, same[:-1]))} and {same[-1]}"


def _in_culprit(culprit: dict | None) -> str:
    """ ", in the callback TensorBoard built at line 12 (`code`)", or "" when none is known."""
    if not culprit or not culprit.get("class"):
        return ""
    if culprit.get("kind") == "callback class":
        return f", in {culprit['class']}, passed as a class where model.fit needs an instance"
    return f", in the {culprit.get('kind')} {culprit['class']}" + (
        f" built{line_and_code(culprit)}" if culprit.get("line") else ""
    )


def from_the_script_on(error: str, script: str) -> str:
    """The traceback without the frames of the probe and runpy above the learner's script."""
    lines = error.splitlines()
    first = next((i for i, line in enumerate(lines) if f'File "{script}"' in line), None)
    if not script or first is None:
        return error
    header = max(
        (i for i in range(first) if "Traceback (most recent call last)" in lines[i]), default=None
    )
    if header is None:
        return error
    return "\n".join([*lines[: header + 1], *lines[first:]])
