"""Step 7: MetricAverageCallback averages the metrics before any callback reads them."""

import ast

from grader.reading.horovod_collectives import (
    AVERAGING_ACTS,
    BROADCAST_ACTS,
    BROADCAST_CALLBACK,
    COLLECTIVES,
    METRIC_AVERAGE_CALLBACK,
    WAITS,
    is_broadcast,
)
from grader.reading.horovod_schedule import SCHEDULE, WARMUP
from grader.reading.rules.fit import callbacks, callbacks_named
from grader.reading.rules.workers import collective_failure, every_rank_failure
from grader.reading.syntax import HVD
from grader.reading.verdicts import Advice, Failure, Note, first_verdict

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
LAMBDA_CALLBACK = "tensorflow.keras.callbacks.LambdaCallback"


COLLECTIVE_HANG = f"it {WAITS}: call it on every worker, and print its result on rank 0"


def check(script):
    return first_verdict(lambda: _callback_failure(script), lambda: _collectives_failure(script))


def _own_averaging(script):
    """A Note when a callback of the script's own (its class, a LambdaCallback) may average the
    metrics with hvd.allreduce in MetricAverageCallback's place: the run decides."""
    entries, _ = callbacks(script, LOOKED_FOR)
    averages = script.calls_to(f"{HVD}.allreduce", "horovod.tensorflow.allreduce")
    if not entries or not averages:
        return None
    classes = {
        ancestor.name
        for call in averages
        for ancestor in script.ancestors(call)
        if isinstance(ancestor, ast.ClassDef)
    }
    own = [
        entry
        for entry in entries
        if entry.name == LAMBDA_CALLBACK
        or (entry.name and "." not in entry.name and entry.kind in classes)
    ]
    if not own:
        return None
    return Note(
        f"line {own[0].line}: no hvd.callbacks.MetricAverageCallback, but `{own[0].kind}` may "
        f"average the metrics itself (hvd.allreduce on line {averages[0].lineno}); it looked "
        f"for {LOOKED_FOR}",
        own[0].line,
    )


def _collectives_failure(script):
    """hvd.allreduce(...) and Horovod's other reductions must be reached by every worker."""
    for call in script.calls_to(*COLLECTIVES):
        if is_broadcast(script.qualified_name(call.func)) or script.in_function(call):
            continue  # broadcasts are step 8's
        verdict = collective_failure(
            script, call, f"{script.source(call.func)}(...)", COLLECTIVE_HANG
        )
        if verdict:
            return verdict
    return None


def _callback_failure(script):
    entries, ours, failure = callbacks_named(script, METRIC_AVERAGE_CALLBACK, LOOKED_FOR)
    if failure:
        return _own_averaging(script) or failure
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
        if later.name == BROADCAST_CALLBACK:
            # Independent (grader/reading/horovod_collectives.py): either order trains alike.
            return Advice(
                f"line {entry.line}: MetricAverageCallback comes before the broadcast callback "
                f"(line {later.line}); that works the same (the broadcast acts {BROADCAST_ACTS}, "
                f"the averaging {AVERAGING_ACTS}), but Horovod's examples put the broadcast first",
                entry.line,
            )
    return None
