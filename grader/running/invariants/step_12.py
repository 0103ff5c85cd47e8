"""Step 12's run invariant: every rank trains with NovoGrad, wrapped in hvd.DistributedOptimizer."""

from __future__ import annotations

from grader.report import FAILED, PASSED, Result
from grader.running.evidence import Evidence
from grader.running.expected import same
from grader.running.invariants.shared import (
    Setting,
    finding,
    not_reached,
    not_shown,
    parsed,
    ranks_text,
    ranks_with,
)

STEP = 12
TITLE = "NovoGrad"  # the title of its findings
SWITCHES_OPTIMIZER = True  # from the lesson's SGD (Setting.sgd_preset_lr: the rate before)

NOVOGRAD_HINT = (
    "opt = tfa.optimizers.NovoGrad(learning_rate=scaled_lr, ...), then wrap it in "
    "hvd.DistributedOptimizer as before."
)


def check(evidence: Evidence, setting: Setting) -> Result:
    fits = ranks_with(evidence, 1, lambda r: r.fit)
    if len(fits) < evidence.np:
        return not_shown(STEP, not_reached(evidence, fits, "reached model.fit"))
    others = {
        rank: fit.get("optimizer")
        for rank, fit in fits.items()
        if "novograd" not in str(fit.get("optimizer")).lower()
    }
    if others:
        rank, name = next(iter(others.items()))
        return finding(STEP, FAILED, f"rank {rank} trains with {name}, not NovoGrad", NOVOGRAD_HINT)
    bare = [rank for rank, fit in fits.items() if not fit.get("distributed_optimizer")]
    wrapped = {
        name for record in evidence.ranks(1).values() for name in record.data.get("wrapped") or []
    }
    if bare and wrapped and not any("novograd" in name.lower() for name in wrapped):
        return finding(
            STEP,
            FAILED,
            f"{ranks_text(bare)} train with a bare NovoGrad, made after "
            f"hvd.DistributedOptimizer wrapped {' and '.join(sorted(wrapped))}: no "
            "step averages the workers' gradients",
            NOVOGRAD_HINT,
        )
    if bare:  # never wrapped at all: step 4's mistake, which its own finding names
        return finding(
            STEP,
            PASSED,
            "every rank trains with NovoGrad (not wrapped in "
            "hvd.DistributedOptimizer: step 4's part)",
        )
    base_lr, sgd_lr = parsed(evidence, "base_lr", setting), setting.sgd_preset_lr
    if sgd_lr is not None and isinstance(base_lr, (int, float)) and same(base_lr, sgd_lr):
        return finding(
            STEP,
            FAILED,
            f"every rank trains with NovoGrad, but --preset "
            f"{setting.asked.get('preset')} still gives SGD's --base-lr {base_lr:g}: "
            "NovoGrad's normalized steps are bigger than SGD's at one rate",
            "Halve base_lr in the preset for NovoGrad, as the lesson's step 12 does.",
        )
    return finding(
        STEP, PASSED, "every rank trains with NovoGrad, wrapped in hvd.DistributedOptimizer"
    )
