"""Step 3's run invariant: only rank 0 prints Keras's progress."""

from __future__ import annotations

from grader.report import FAILED, PASSED, Result
from grader.running.evidence import Evidence
from grader.running.invariants.shared import Setting, finding, not_shown, ranks_with

STEP = 3
TITLE = "one rank prints"  # the title of its findings


def check(evidence: Evidence, setting: Setting) -> Result:
    printed = {
        rank: record.data.get("printed") or {}
        for run in sorted(evidence.runs)
        for rank, record in evidence.ranks(run).items()
        if (record.data.get("printed") or {}).get("chars")
    }
    others = [rank for rank in sorted(printed) if rank]
    hint = (
        "Print on rank 0 only: verbose = 1 if hvd.rank() == 0 else 0, passed to model.fit "
        "and to every callback that prints; other prints under `if hvd.rank() == 0:`."
    )
    if others:
        first = " ".join(printed[others[0]].get("first", "").split())[:80]
        return finding(
            STEP,
            FAILED,
            f"rank {others[0]} printed too ({printed[others[0]]['chars']} "
            f"characters, beginning `{first}`): every worker shows the same progress",
            hint,
        )
    fits = ranks_with(evidence, 1, lambda r: r.fit)
    if 0 not in fits or not evidence.ranks(1)[0].finished:
        return not_shown(
            STEP,
            "can't tell: rank 0 did not finish the first run, and the "
            "others printed nothing before that",
        )
    if 0 not in printed:
        return finding(
            STEP,
            FAILED,
            "no rank printed anything: rank 0 should show the training's progress and results",
            hint,
        )
    return finding(
        STEP,
        PASSED,
        f"only rank 0 printed ({printed[0]['chars']} characters); the other ranks printed nothing",
    )
