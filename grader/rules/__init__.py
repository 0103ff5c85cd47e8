"""The rules, one module per step; each has STEP, HINT and check(script) -> Failure | None."""

from grader.rules import (
    step_01,
    step_02,
    step_03,
    step_04,
    step_05,
    step_06,
    step_07,
    step_08,
    step_09,
    step_10,
    step_11,
    step_12,
)

# Keyed by the step each rule checks, in step order.
RULES = {
    rule.STEP: rule
    for rule in sorted(
        (step_01, step_02, step_03, step_04, step_05, step_06,
         step_07, step_08, step_09, step_10, step_11, step_12),
        key=lambda rule: rule.STEP,
    )
}
