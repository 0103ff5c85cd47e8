"""Step 10's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case
from grader_cases.mistakes.edits import SCALED

CASES = [
    Case(10, "not scaled", SCALED, "scaled_lr = args.base_lr", False, "not scaled"),
    Case(
        10,
        "local size",
        SCALED,
        "scaled_lr = args.base_lr * hvd.local_size()",
        False,
        "local_size()",
    ),
    Case(10, "rank", SCALED, "scaled_lr = args.base_lr * hvd.rank()", False, "rank"),
    Case(10, "divided", SCALED, "scaled_lr = args.base_lr / hvd.size()", False, "divided"),
    Case(
        10,
        "square root",
        (SCALED, "import json\n"),
        ("scaled_lr = args.base_lr * math.sqrt(hvd.size())", "import json\nimport math\n"),
        False,
        "square root",
    ),
    Case(
        10,
        "optimizer gets the base rate",
        "SGD(learning_rate=scaled_lr,",
        "SGD(learning_rate=args.base_lr,",
        False,
        "not scaled",
    ),
    Case(
        10,
        "NovoGrad gets the base rate",
        "NovoGrad(learning_rate=scaled_lr,",
        "NovoGrad(learning_rate=args.base_lr,",
        False,
        "not scaled",
        base=12,
    ),
    Case(
        10,
        "scheduler uses the base rate",
        "lambda epoch: scaled_lr * step_decay(epoch)",
        "lambda epoch: args.base_lr * step_decay(epoch)",
        False,
        "LearningRateScheduler",
    ),
    Case(10, "size first", SCALED, "scaled_lr = hvd.size() * args.base_lr", True, base=12),
    Case(10, "lr keyword", "SGD(learning_rate=scaled_lr,", "SGD(lr=scaled_lr,", True),
    Case(
        10,
        "size in a variable",
        SCALED,
        "workers = hvd.size()\nscaled_lr = args.base_lr * workers",
        True,
    ),
]
