"""The run-for-real check's verdict as the one grader.report.Result: a run and its findings.

The result's status is FAILED when the run did not finish (crashed, hung, stopped, not run),
a finding failed or the script kept the run from showing one (`withheld`), CANT_TELL when a
finding could not tell, else PASSED; its details are the
findings (one Result per step's invariant) and its `run` the run's evidence (how it ended, how
long it took, its log and the failing rank's error). The message says how the run went.
"""

from __future__ import annotations

from grader.report import CANT_TELL, FAILED, PASSED, Result, Run, worst
from grader.running.outcome import NOT_RUN

NOT_RUN_SAYS = "not run: "  # how a run refused before it started begins its message


def title(step: int, workers: int) -> str:
    return f"Step {step}, run for real on {workers} workers"


def run_result(step: int, path, outcome, findings: list, *, seconds: float, workers: int) -> Result:
    """The verdict of a run that ended as `outcome` (grader.running.outcome.Outcome) with these
    findings of steps 4..step."""
    run = Run(
        outcome.kind,
        seconds=seconds,
        workers=workers,
        error=outcome.error,
        line=outcome.line,
        code=outcome.code,
        resumed=outcome.resumed,
        exception=outcome.exception,
        culprit=outcome.culprit,
    )
    # A step the script kept the run from showing earns nothing (grader/decision.py).
    shown = run.finished and not any(detail.withheld for detail in findings)
    status = worst(detail.status for detail in findings) if shown else FAILED
    message = _summary(outcome.message, findings, run)
    return Result(
        status,
        title(step, workers),
        message,
        step=step,
        hint=outcome.hint,
        path=str(path),
        details=findings,
        run=run,
    )


def not_run(
    step: int,
    path,
    reason: str,
    *,
    workers: int,
    unreadable: bool = False,
    file_problem: bool = False,
) -> Result:
    """The verdict of a run refused before it started: failed, saying why. `file_problem`: the
    script's own fault (it can't be read or parsed), not this machine's."""
    message = NOT_RUN_SAYS + reason
    return Result(
        FAILED,
        title(step, workers),
        message,
        step=step,
        path=str(path),
        file_problem=file_problem or unreadable,
        unreadable=unreadable,
        run=Run(NOT_RUN, workers=workers),
    )


def _summary(message: str, findings: list, run: Run) -> str:
    """How the run went, in one sentence: its end, or how many findings hold; its time."""
    took = f" ({run.seconds:.0f} s)"
    if not run.finished:
        return message + took
    held, failed, unknown = (
        sum(f.status == status for f in findings) for status in (PASSED, FAILED, CANT_TELL)
    )
    unshown = sum(f.withheld for f in findings)
    unknown -= unshown
    parts = [f"{held} of {len(findings)} hold"]
    if failed:
        parts.append(f"{failed} fail")
    if unshown:
        parts.append(f"{unshown} not shown (no credit)")
    if unknown:
        parts.append(f"{unknown} can't tell")
    return "the script ran on every worker; " + ", ".join(parts) + took
