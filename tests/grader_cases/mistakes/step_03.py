"""Step 3's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case

CASES = [
    Case(
        3,
        "local rank",
        "1 if hvd.rank() == 0 else 0",
        "1 if hvd.local_rank() == 0 else 0",
        False,
        "one worker per machine",
    ),
    Case(
        3,
        "rank 1",
        "1 if hvd.rank() == 0 else 0",
        "1 if hvd.rank() == 1 else 0",
        False,
        "picks rank 1",
    ),
    Case(
        3,
        "inverted",
        "1 if hvd.rank() == 0 else 0",
        "1 if hvd.rank() else 0",
        False,
        "on every worker but rank 0",
    ),
    Case(
        3,
        "fit still verbose",
        "    verbose=verbose,\n)",
        "    verbose=1,\n)",
        False,
        "1 on every worker",
    ),
    Case(
        3,
        "not rank-dependent",
        "1 if hvd.rank() == 0 else 0",
        "1 if hvd.size() > 0 else 0",
        False,
        "does not depend",
    ),
    Case(3, "int of comparison", "1 if hvd.rank() == 0 else 0", "int(hvd.rank() == 0)", True),
    Case(
        3, "reversed comparison", "1 if hvd.rank() == 0 else 0", "1 if 0 == hvd.rank() else 0", True
    ),
    Case(3, "not rank", "1 if hvd.rank() == 0 else 0", "0 if hvd.rank() else 1", True),
    Case(3, "bool", "1 if hvd.rank() == 0 else 0", "not hvd.rank()", True, base=12),
]
