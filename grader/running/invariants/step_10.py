"""Step 10's run invariant: the learning rate is the base rate times the number of workers."""

from __future__ import annotations

from grader.report import CANT_TELL, FAILED, PASSED, Result
from grader.running.evidence import Evidence
from grader.running.invariants.shared import (
    SAME_RATE,
    Setting,
    epochs_cut,
    finding,
    not_shown,
    rates_by_epoch,
    recipe,
    schedule_text,
)

STEP = 10
TITLE = "the scaled learning rate"  # the title of its findings


def check(evidence: Evidence, setting: Setting) -> Result:
    epochs = rates_by_epoch(evidence, 0, finished=True)
    if not epochs:
        return not_shown(STEP, "can't tell: rank 0 finished no epoch")
    wanted = recipe(evidence, setting)
    if wanted is None:
        return finding(STEP, CANT_TELL, "can't tell: the script has no --base-lr to scale")
    full = [
        epoch
        for _, epoch, _ in epochs
        if epoch >= wanted.warmup_epochs and not any(epoch >= d for d in wanted.lr_drops)
    ]
    if not full:
        return not_shown(
            STEP,
            "can't tell: rank 0 finished no epoch that trains at the "
            "full rate (after the warmup, before a drop)" + epochs_cut(evidence, setting),
        )
    base_lr = wanted.base_lr
    scaled = base_lr * setting.np
    highest = max(max(rates) for _, _, rates in epochs)
    schedule = schedule_text(epochs)
    if abs(highest - scaled) <= SAME_RATE * scaled:
        return finding(
            STEP,
            PASSED,
            f"the learning rate reached {scaled:.4g} = --base-lr "
            f"{base_lr:g} × {setting.np} workers ({schedule})",
        )
    hint = "Multiply it by the number of workers: scaled_lr = args.base_lr * hvd.size()."
    if abs(highest - base_lr) <= SAME_RATE * base_lr:
        return finding(
            STEP,
            FAILED,
            f"the learning rate stays at --base-lr {base_lr:g} "
            f"({schedule}), though every step averages {setting.np} workers' "
            "batches",
            hint,
        )
    return finding(
        STEP,
        FAILED,
        f"the learning rate peaked at {highest:.4g}, not {scaled:.4g} = "
        f"--base-lr {base_lr:g} × {setting.np} workers ({schedule})",
        hint,
    )
