"""Step 4's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case
from grader_cases.mistakes.edits import COMPILE, CREATE, WRAP

CASES = [
    Case(
        4,
        "wrapped but unused",
        WRAP,
        "    dist_opt = hvd.DistributedOptimizer(opt)\n",
        False,
        "unwrapped",
    ),
    Case(
        4, "result thrown away", WRAP, "    hvd.DistributedOptimizer(opt)\n", False, "thrown away"
    ),
    Case(
        4,
        "wrapped twice",
        WRAP,
        "    opt = hvd.DistributedOptimizer(hvd.DistributedOptimizer(opt))\n",
        False,
        "twice",
    ),
    Case(
        4,
        "wrapped after compile",
        (WRAP, 'metrics=["accuracy"])\n'),
        ("", 'metrics=["accuracy"])\n' + WRAP),
        False,
        "after model.compile",
    ),
    Case(
        4,
        "inline in compile",
        (WRAP, COMPILE),
        ("", "model.compile(optimizer=hvd.DistributedOptimizer(opt),"),
        True,
    ),
    Case(4, "positional optimizer", COMPILE, "model.compile(opt,", True, base=12),
    Case(
        4,
        "other name, NovoGrad",
        (WRAP, COMPILE, CREATE),
        (
            "    distributed = hvd.DistributedOptimizer(opt)\n",
            "model.compile(optimizer=distributed,",
            CREATE.replace("opt.", "distributed."),
        ),
        True,
        base=12,
    ),
]
