"""Step 5's run invariant: after the first training step every rank has the same weights, in the
resumed launch too."""

from __future__ import annotations

from grader.report import FAILED, PASSED, Result
from grader.running.evidence import Evidence
from grader.running.invariants.shared import (
    Setting,
    finding,
    not_reached,
    not_shown,
    on_some_ranks,
    ranks_with,
    relative,
)

STEP = 5
TITLE = "the same weights"  # the title of its findings


def check(evidence: Evidence, setting: Setting) -> Result:
    partly = on_some_ranks(evidence, "BroadcastGlobalVariablesCallback", STEP)
    if partly is not None:
        return partly
    weights = ranks_with(evidence, 1, lambda r: r.weights_after_first_step)
    if len(weights) < evidence.np:
        return not_shown(STEP, not_reached(evidence, weights, "finished a training step"))
    first = weights[0]
    different = [
        rank
        for rank, values in weights.items()
        if values.shape != first.shape or relative(first, values) > 0
    ]
    if not different:
        return _same_weights_resumed(evidence) or finding(
            STEP,
            PASSED,
            "after the first training step every rank has the same weights"
            + (
                ", in the resumed launch too"
                if len(ranks_with(evidence, 2, lambda r: r.weights_after_first_step)) == evidence.np
                else ""
            ),
        )
    return finding(
        STEP,
        FAILED,
        f"after the first training step the weights of rank {different[0]} differ from rank "
        f"0's (by up to {relative(first, weights[different[0]]):.0%}): every rank started from "
        "its own random weights",
        "Add hvd.callbacks.BroadcastGlobalVariablesCallback(0) to the callbacks of model.fit, on "
        "every rank: it copies rank 0's weights to all after the first step.",
    )


def _same_weights_resumed(evidence: Evidence) -> Result | None:
    """FAILED when the ranks' weights differ after the resumed launch's first step (rank 0's
    loaded optimizer state never sent: a hand broadcast of the weights before model.fit keeps
    the first launch equal, not the resume); None otherwise or when it did not get that far."""
    weights = ranks_with(evidence, 2, lambda r: r.weights_after_first_step)
    if len(weights) < evidence.np:
        return None
    first = weights[0]
    different = [
        rank
        for rank, values in weights.items()
        if values.shape != first.shape or relative(first, values) > 0
    ]
    if not different:
        return None
    return finding(
        STEP,
        FAILED,
        f"after the first training step of the resumed launch the weights of rank "
        f"{different[0]} differ from rank 0's (by up to "
        f"{relative(first, weights[different[0]]):.0%}): rank 0 went on from its checkpoint, "
        "the others from what they had",
        "Add hvd.callbacks.BroadcastGlobalVariablesCallback(0) to the callbacks of model.fit, on "
        "every rank: after the first step it copies rank 0's weights and optimizer state to all, "
        "in every launch.",
    )
