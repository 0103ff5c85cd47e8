"""Step 1's run invariant: every worker initialized Horovod before training, and together they form
one job."""

from __future__ import annotations

from grader.report import FAILED, PASSED, Result
from grader.running.evidence import Evidence, line_and_code
from grader.running.invariants.shared import (
    Setting,
    finding,
    not_reached,
    not_shown,
    ranks_text,
    ranks_with,
)

STEP = 1
TITLE = "Horovod on every worker"  # the title of its findings

NOT_INITIALIZED = "Horovod has not been initialized"  # Horovod 0.28.1's error before hvd.init()


def _errors(evidence: Evidence) -> list:
    """[(run, rank, error)] of every rank that stopped with an error."""
    return [
        (run, rank, record.error)
        for run in sorted(evidence.runs)
        for rank, record in sorted(evidence.ranks(run).items())
        if record.error
    ]


def check(evidence: Evidence, setting: Setting) -> Result:
    hint = (
        "Call hvd.init() once, near the top, before anything else of Horovod (hvd.rank(), "
        "hvd.size(), a callback, DistributedOptimizer)."
    )
    for run, rank, error in _errors(evidence):
        if NOT_INITIALIZED in (error.get("message") or ""):
            return finding(
                STEP,
                FAILED,
                f"rank {rank} used Horovod before hvd.init()"
                f"{line_and_code(error)}: {error['message']}",
                hint,
            )
    states = ranks_with(evidence, 1, lambda r: r.data.get("horovod"))
    if len(states) < evidence.np:
        return not_shown(STEP, not_reached(evidence, states, "reached model.fit"))
    alone = [rank for rank, state in states.items() if not state.get("initialized")]
    if alone:
        return finding(
            STEP,
            FAILED,
            f"at model.fit Horovod was not initialized on "
            f"{ranks_text(alone)}: each worker trained alone, on its own",
            hint,
        )
    sizes = {state.get("size") for state in states.values()}
    ranks = sorted(state.get("rank") for state in states.values())
    if sizes != {setting.np} or ranks != list(range(setting.np)):
        return finding(
            STEP,
            FAILED,
            f"the {setting.np} workers did not form one job: they saw "
            f"sizes {sorted(sizes)} and ranks {ranks}",
            hint,
        )
    return finding(
        STEP,
        PASSED,
        f"every worker initialized Horovod before training: ranks "
        f"{ranks[0]}..{ranks[-1]} of {setting.np}",
    )
