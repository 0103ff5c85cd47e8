"""The rules: one module per step, `step_NN.py` (found by its name), with STEP, HINT and
check(script) returning a grader.reading.verdicts Failure, Note (or Advice), or None when the step is
done.

A rule reads like its step's lesson: it asks the question modules (grader.reading.ranks, scaling,
training, schedule, horovod_*) and the names layer (grader.reading.names.Script) through their public
APIs only, and words the verdict. What several steps share is phrased once, in a module named
after what it knows:
- fit.py: model.fit and the callbacks that reach it, the optimizer given to model.compile;
- workers.py: a line or value for rank 0 only, a callback or a collective on every worker;
- scaled.py: a value multiplied or divided by hvd.size();
- uncalled.py: a Horovod function named but not called (`hvd.size` without parentheses);
- optimizer_weights.py (step 8): a resumed run's fresh optimizer makes its variables at once.
"""

from workbook.facts import step_modules

# Found, not listed: a new step's rule is one new module (tests/unit/test_manifest.py checks that
# the steps found are the manifest's, workbook.facts.STEPS).
RULES = step_modules(__name__, __path__)
