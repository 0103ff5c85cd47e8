"""Step 7: MetricAverageCallback averages the metrics before any callback reads them."""

from grader.verdicts import Failure, first_verdict
from grader.rules.common import (
    BROADCAST,
    Advice,
    METRIC_AVERAGE,
    SCHEDULE,
    WARMUP,
    callbacks,
    collective_failure,
    every_rank_failure,
    missing_callback,
)
from grader.syntax import COLLECTIVES

STEP = 7
HINT = (
    "Add hvd.callbacks.MetricAverageCallback() to the callbacks of every worker, after the "
    "broadcast callback and before the callbacks that read metrics (learning rate schedules, "
    "ModelCheckpoint, TensorBoard)."
)
# Keras callbacks that read or record the metrics of an epoch.
KERAS_METRIC_READERS = {
    "ModelCheckpoint",
    "TensorBoard",
    "EarlyStopping",
    "CSVLogger",
    "ReduceLROnPlateau",
    "LearningRateScheduler",
    "RemoteMonitor",
    "BackupAndRestore",
}

LOOKED_FOR = "hvd.callbacks.MetricAverageCallback() on every worker"


COLLECTIVE_HANG = (
    "it completes only when every worker calls it, so the workers that call it wait forever "
    "for the others (training hangs): call it on every worker, and print its result on rank 0"
)


def check(script):
    return first_verdict(lambda: _callback_failure(script), lambda: _collectives_failure(script))


def _collectives_failure(script):
    """hvd.allreduce(...) and Horovod's other reductions must be reached by every worker."""
    for call in script.calls_to(*COLLECTIVES):
        if "broadcast" in script.qualified_name(call.func) or script.in_function(call):
            continue  # broadcasts are step 8's
        verdict = collective_failure(
            script, call, f"{script.source(call.func)}(...)", COLLECTIVE_HANG
        )
        if verdict:
            return verdict
    return None


def _callback_failure(script):
    entries, failure = callbacks(script, LOOKED_FOR)
    if failure:
        return failure
    ours = [entry for entry in entries if entry.name == METRIC_AVERAGE]
    if not ours:
        return missing_callback(script, entries, METRIC_AVERAGE, "MetricAverageCallback")
    entry = ours[0]
    failure = every_rank_failure(script, entry, "MetricAverageCallback")
    if failure:
        return failure
    position = entries.index(entry)
    readers = [
        earlier
        for earlier in entries[:position]
        if earlier.name in (WARMUP, SCHEDULE)
        or (earlier.kind in KERAS_METRIC_READERS and not earlier.name.startswith("horovod"))
    ]
    if readers:
        listed = ", ".join(f"{reader.kind} on line {reader.line}" for reader in readers)
        return Failure(
            f"line {entry.line}: MetricAverageCallback comes after callbacks that read the "
            f"metrics ({listed}), which then see the metrics of their own worker only: move it "
            "before them, right after the broadcast callback",
            entry.line,
        )
    for later in entries[position + 1 :]:
        if later.name == BROADCAST:
            # Independent: the broadcast runs after the first batch, the averaging at each
            # epoch's end (Horovod 0.28.1, _keras/callbacks.py), so either order trains alike.
            return Advice(
                f"line {entry.line}: MetricAverageCallback comes before the broadcast callback "
                f"(line {later.line}); that works the same (the broadcast acts after the first "
                "batch, the averaging at the end of each epoch), but Horovod's examples put the "
                "broadcast first",
                entry.line,
            )
    return None
