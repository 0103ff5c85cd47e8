"""The rules: one module per step, `step_NN.py`, with STEP, HINT and check(script) returning a
grader.verdicts Failure, Note (or Advice), or None when the step is done.

A rule reads like its step's lesson: it asks the question modules (grader.ranks, scaling,
training, schedule, horovod_*) and the names layer (grader.names.Script) through their public
APIs only, and words the verdict. What several steps share is phrased once, in a module named
after what it knows:
- fit.py: model.fit and the callbacks that reach it, the optimizer given to model.compile;
- workers.py: a line or value for rank 0 only, a callback or a collective on every worker;
- scaled.py: a value multiplied or divided by hvd.size();
- uncalled.py: a Horovod function named but not called (`hvd.size` without parentheses);
- optimizer_weights.py (step 8): a resumed run's fresh optimizer makes its variables at once.
"""

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
