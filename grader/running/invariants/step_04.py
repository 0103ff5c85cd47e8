"""Step 4's run invariant: every rank applies the same update, the gradients averaged across the
ranks."""

from __future__ import annotations

from grader.report import CANT_TELL, FAILED, PASSED, Result
from grader.running.evidence import Evidence
from grader.running.invariants.shared import (
    SAME_RATE,
    Setting,
    finding,
    not_reached,
    not_shown,
    ranks_text,
    ranks_with,
    relative,
)

STEP = 4
TITLE = "averaged updates"  # the title of its findings

# relative; the reduced gradient against the mean of the ranks' own (float32 sums, or fp16
# compression at worst)
SAME_GRADIENT = 1e-2


def rounding_excess(before: dict, updates: dict) -> tuple:
    """(rank, how many times float32 rounding the rank's update differs from rank 0's).

    The averaged gradient, and so the update, is the same on every rank; only adding it to
    weights that differ (before the broadcast) rounds differently: by half a float32 step of
    the weights at most. 1 or less: the same update.
    """
    import numpy as np

    eps = float(np.finfo(np.float32).eps)
    worst_rank, worst = 0, 0.0
    for rank, update in updates.items():
        if not rank:
            continue
        after = [before[0] + updates[0], before[rank] + update]
        size = np.max(np.abs([before[0], before[rank], *after]), axis=0)
        allowed = 2 * eps * size + 1e-30
        excess = float(np.max(np.abs(update - updates[0]) / allowed))
        if excess > worst:
            worst_rank, worst = rank, excess
    return worst_rank, worst


def check(evidence: Evidence, setting: Setting) -> Result:
    updates = ranks_with(evidence, 1, lambda r: r.first_update)
    before = ranks_with(evidence, 1, lambda r: r.weights_before_first_step)
    if len(updates) < evidence.np or len(before) < evidence.np:
        return not_shown(STEP, not_reached(evidence, updates, "finished a training step"))
    first = updates[0]
    if not first.size or not first.any():
        return finding(
            STEP, CANT_TELL, "can't tell: the first training step did not change rank 0's weights"
        )
    if any(update.shape != first.shape for update in updates.values()):
        return finding(STEP, FAILED, "the ranks train models of different sizes")
    rank, excess = rounding_excess(before, updates)
    if excess <= 1:
        return averaged_not_summed(evidence)
    unequal_rates = _first_rates_differ(evidence)
    if unequal_rates:
        return finding(
            STEP,
            CANT_TELL,
            f"can't tell: in the first training step rank 0 and rank {rank} changed their "
            f"weights differently, but they already trained it at different learning rates "
            f"({unequal_rates}): that differs first (the learning rate's steps), and it alone "
            "makes the updates differ",
        )
    plain = [
        rank
        for rank, record in sorted(evidence.ranks(1).items())
        if record.fit and not record.fit.get("distributed_optimizer")
    ]
    why = (
        f" ({ranks_text(plain)}: a plain {evidence.ranks(1)[plain[0]].fit.get('optimizer')}"
        ", not wrapped)"
        if plain
        else ""
    )
    return finding(
        STEP,
        FAILED,
        f"in the first training step rank 0 and rank {rank} changed their weights differently "
        f"(by up to {relative(first, updates[rank]):.0%} of the change): each rank applied the "
        f"gradient of its own batch{why}",
        "Wrap the optimizer: opt = hvd.DistributedOptimizer(opt), and compile the model with it; "
        "it averages the gradients of all workers before every update.",
    )


def _first_rates_differ(evidence: Evidence) -> str:
    """'rank 0: A, rank N: B' when the ranks' first training step of launch 1 ran at different
    learning rates (beyond float32 rounding), else ""."""
    first = {}
    for rank, record in sorted(evidence.ranks(1).items()):
        rates = record.learning_rates()
        if rates and rates[min(rates)] and rates[min(rates)][0] is not None:
            first[rank] = rates[min(rates)][0]
    if 0 not in first:
        return ""
    for rank, rate in first.items():
        if abs(rate - first[0]) > SAME_RATE * max(abs(first[0]), abs(rate)):
            return f"rank 0: {first[0]:.4g}, rank {rank}: {rate:.4g}"
    return ""


def averaged_not_summed(evidence: Evidence) -> Result:
    """Every rank made the same update: was it the average of their gradients (or the sum)?"""
    same_update = "in the first training step every rank changed its weights by the same amount"
    local = ranks_with(evidence, 1, lambda r: r.local_gradient)
    reduced = ranks_with(evidence, 1, lambda r: r.reduced_gradient)
    if len(local) < evidence.np or 0 not in reduced:
        return finding(STEP, PASSED, f"{same_update} (up to float32 rounding)")
    if len({vector.shape for vector in local.values()}) > 1:
        return finding(
            STEP,
            CANT_TELL,
            f"can't tell: {same_update}, but the ranks' gradients have different sizes",
        )
    total = sum(local.values())
    mean = total / evidence.np
    if relative(mean, reduced[0]) <= SAME_GRADIENT:
        return finding(
            STEP, PASSED, f"{same_update}: the average of the {evidence.np} ranks' gradients"
        )
    if relative(total, reduced[0]) <= SAME_GRADIENT:
        return finding(
            STEP,
            FAILED,
            f"{same_update}, but by the sum of the {evidence.np} ranks' gradients, not their "
            f"average: every update is {evidence.np} times too large",
            "Average the gradients: hvd.DistributedOptimizer(opt) with its default op "
            "(hvd.Average), not op=hvd.Sum.",
        )
    return finding(
        STEP,
        CANT_TELL,
        f"can't tell: {same_update}, but by neither the average nor "
        "the sum of the ranks' gradients of that step (gradients accumulated over "
        "several steps?)",
    )
