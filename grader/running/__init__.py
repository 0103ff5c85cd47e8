"""The run-for-real check: the learner's script on 2 workers for a few steps, and what the ranks did.

    from grader import run_step
    run_step(6)        # runs fashion_mnist.py; checks the invariants of steps 4..6

In a terminal: python -m grader run FILE --step N

One module per job, each importing only those above it:

    probe        runs in each worker: the script, unchanged, with hooks that record what it does
                 (its two model.fit callbacks in probe_callbacks, loaded by file path)
    evidence     the records of every rank, read back
    invariants/  what must hold once step N is done (identical updates, same weights...): one
                 module per step, step_NN.py, each a finding, a grader.report.Result (PASSED,
                 FAILED or CANT_TELL)
    outcome      how the run ended (outcome_of): finished, crashed (whose error), hung (who
                 waits where)
    run_result   the verdict as the checker's one grader.report.Result: the findings as its
                 details, the run's end, time, log and error as its `run` (grader.report.Run)
    run_check    run_step(): the run under the runner's horovodrun, watched for hangs

The static check, this check, the batch grader and the class report share one vocabulary,
grader.report's Result: no result type of the run's own.
"""

from grader.running.run_check import run_step

__all__ = ["run_step"]
