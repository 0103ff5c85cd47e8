"""Step 9: checkpoints and TensorBoard logs are written by rank 0 only."""

from grader.reading.rules.fit import callbacks
from grader.reading.rules.workers import rank0_guard_failure
from grader.reading.verdicts import Failure, first_verdict

STEP = 9
HINT = (
    "Add the ModelCheckpoint and TensorBoard callbacks on rank 0 only, e.g. under "
    "`if hvd.rank() == 0:`."
)
WRITERS = ("ModelCheckpoint", "TensorBoard", "CSVLogger", "BackupAndRestore")
REQUIRED = ("ModelCheckpoint", "TensorBoard")

LOOKED_FOR = "ModelCheckpoint and TensorBoard on rank 0 only"


def check(script):
    entries, failure = callbacks(script, LOOKED_FOR)
    if failure:
        return failure
    for kind in REQUIRED:
        if not any(entry.kind == kind for entry in entries):
            return Failure(f"no {kind} reaches model.fit: keep it, and add it on rank 0 only")
    return first_verdict(
        *(
            lambda entry=entry: rank0_guard_failure(
                script,
                entry.guards,
                entry.line,
                f"{entry.kind}(...)",
                ": the workers would all write the same files at once",
            )
            for entry in entries
            if entry.kind in WRITERS and not entry.name.startswith("horovod")
        )
    )
