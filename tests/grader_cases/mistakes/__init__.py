"""Realistic wrong (and unusual but right) versions of each step, as edits of the reference.

Each Case (case.py) starts from a reference script (after step `base`, by default after `step`)
and replaces code in it; the replaced text must occur exactly once (or, with replace_all, at
least once), so a case that no longer fits the reference fails loudly instead of testing
nothing. Several replacements are applied in order.

A wrong case must fail check `step` with a message containing `expect_message`; a right case
must pass every check that its base script passes (and, with an `expect_message`, say it in the
message of check `step`: a note of what the grader can't tell).

A step's cases are in step_NN.py (found by its name, like the step's rule), the cases of a kind
of mistake that several steps share in across_steps.py (each still names its step), and the
reference's lines they edit, written once, in edits.py.
"""

from __future__ import annotations

import importlib
import pkgutil

from grader_cases.mistakes import across_steps
from grader_cases.mistakes.case import Case


def _step_cases() -> dict:
    """{step: the cases of step_NN.py}, in step order."""
    found = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("step_"):
            found[int(module.name.removeprefix("step_"))] = importlib.import_module(
                f"{__name__}.{module.name}"
            ).CASES
    return dict(sorted(found.items()))


STEP_CASES = _step_cases()
CASES = [case for cases in STEP_CASES.values() for case in cases] + across_steps.CASES


def cases_of(step: int) -> list:
    """Every case of step `step`: its module's, then those of the kinds across steps."""
    return [case for case in CASES if case.step == step]


__all__ = ["CASES", "STEP_CASES", "Case", "cases_of"]
