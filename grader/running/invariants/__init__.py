"""What must hold on the ranks once step N is done, judged from what they reported.

One module per step, `step_NN.py` (found by its name, like the rules of
grader/reading/rules/), with STEP, TITLE (the step's invariant in a few words, the title of its
findings) and check(evidence, setting), which returns a finding, a grader.report.Result of that step: PASSED
(the invariant holds), FAILED, or CANT_TELL when the run did not show it (a rank that never got
that far, a script that does things this check can't see). A finding states only what the
records show. A step's module may also declare:
- CANT_SHOW: what of the step a run on this machine can't show (the reading decides that part,
  grader/decision.py);
- RESUMES = True: its invariant needs the second launch, the resume from the first's checkpoint
  (every step from it on is run twice);
- SWITCHES_OPTIMIZER = True: it replaces the lesson's SGD (Setting.sgd_preset_lr is the base
  rate of the script before it).
What several steps share is in shared.py.
"""

from __future__ import annotations

from grader.report import CANT_TELL
from grader.running.invariants.shared import Setting, finding, not_shown
from workbook.facts import step_modules

__all__ = [
    "CANT_SHOW",
    "FIRST_STEP",
    "INVARIANTS",
    "NOVOGRAD_STEP",
    "RESUME_STEP",
    "Setting",
    "finding",
    "findings",
    "not_shown",
]


# Found, not listed: a new step's invariant is one new module (tests/unit/test_manifest.py
# checks that the steps found are the manifest's, workbook.facts.STEPS).
MODULES = step_modules(__name__, __path__)
INVARIANTS = {step: module.check for step, module in MODULES.items()}
FIRST_STEP = min(INVARIANTS)
CANT_SHOW = {
    step: module.CANT_SHOW for step, module in MODULES.items() if hasattr(module, "CANT_SHOW")
}
RESUME_STEP = min(step for step, module in MODULES.items() if getattr(module, "RESUMES", False))
NOVOGRAD_STEP = min(
    step for step, module in MODULES.items() if getattr(module, "SWITCHES_OPTIMIZER", False)
)


def findings(evidence, setting: Setting, step: int) -> list:
    """The findings of steps FIRST_STEP..step."""
    found = []
    for number in range(FIRST_STEP, step + 1):
        try:
            found.append(INVARIANTS[number](evidence, setting))
        except Exception as error:  # a bug here must read as one, never as the learner's
            found.append(
                finding(
                    number,
                    CANT_TELL,
                    f"can't tell: the check failed ({type(error).__name__}: {error})",
                )
            )
    return found
