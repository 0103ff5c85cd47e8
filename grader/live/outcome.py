"""How a run of the check ended: finished, crashed (whose error), hung (who waits where), or slow.

A hang is said only with evidence: a rank waits in a collective (hvd.broadcast, allreduce...)
at a line of the script that another rank has already gone past, so the two can never meet.
A run stopped by the time limit without such evidence is called unfinished, with where each
rank was, never a hang.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.live.evidence import Evidence, RankRecord, line_and_code

FINISHED, CRASHED, HUNG, UNFINISHED = "finished", "crashed", "hung", "unfinished"


@dataclass
class Outcome:
    kind: str  # FINISHED, CRASHED, HUNG or UNFINISHED
    message: str
    hint: str = ""
    error: str = ""  # the failing rank's error output


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
    "A collective (hvd.broadcast, hvd.allreduce, the broadcast callback...) returns only once "
    "every rank has called it. Is one under `if hvd.rank() == 0:`, or after a condition that "
    "differs between ranks? Every rank must reach it."
)


def judge(
    run, evidence: Evidence, np: int, timeout: float, stuck: str | None, runs: int
) -> Outcome:
    """The outcome of a finished RunResult; `stuck` is the hang the watcher stopped it for."""
    stuck = stuck or stuck_collective(evidence, runs)
    if stuck:
        return Outcome(HUNG, f"the run hung: {stuck}", HANG_HINT)
    if run.timed_out:
        return Outcome(
            UNFINISHED,
            f"the run did not finish within {timeout:g} s: {_where_all(evidence, np)}",
            "If a rank waits for the others, look for a collective or a number of steps that "
            "differs between ranks; if the machine is busy, run the check again.",
        )
    if run.interrupted:
        return Outcome(UNFINISHED, f"the run was stopped: {_where_all(evidence, np)}")
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
        return Outcome(
            CRASHED,
            f"rank {failed} stopped with an error{line_and_code(error)}{second}: {what}",
            error=from_the_script_on(run.error, script),
        )
    lines = run.error.strip().splitlines()
    last = lines[-1] if lines else run.status()
    who = f"rank {failed}" if failed is not None else "the run"
    return Outcome(CRASHED, f"{who} failed: {last}", error=run.error)


def from_the_script_on(error: str, script: str) -> str:
    """The traceback without the frames of the probe and runpy above the learner's script."""
    lines = error.splitlines()
    first = next((i for i, line in enumerate(lines) if f'File "{script}"' in line), None)
    if not script or first is None:
        return error
    header = max((i for i in range(first) if "Traceback (most recent call last)" in lines[i]),
                 default=None)  # fmt: skip
    if header is None:
        return error
    return "\n".join([*lines[: header + 1], *lines[first:]])
