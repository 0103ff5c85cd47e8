"""Step 5: every worker starts from rank 0's weights (BroadcastGlobalVariablesCallback(0))."""

from grader.reading import ranks
from grader.reading.horovod_collectives import BROADCAST_CALLBACK
from grader.reading.rules import uncalled
from grader.reading.rules.fit import callbacks_named
from grader.reading.rules.workers import every_rank_failure
from grader.reading.syntax import HVD, argument
from grader.reading.verdicts import Failure

SIZE = f"{HVD}.size"

STEP = 5
HINT = (
    "Add hvd.callbacks.BroadcastGlobalVariablesCallback with root rank 0 at the start of the "
    "callbacks list, on every worker."
)

LOOKED_FOR = "hvd.callbacks.BroadcastGlobalVariablesCallback(0) on every worker"


def check(script):
    _, ours, failure = callbacks_named(script, BROADCAST_CALLBACK, LOOKED_FOR)
    if failure:
        return failure
    for entry in ours:
        root = argument(entry.call, "root_rank", 0)
        if root is None:
            return Failure(f"line {entry.line}: give the root rank: 0", entry.line)
        value = script.constant(root)
        if value != 0 or isinstance(value, bool):
            return uncalled.failure(script, root) or Failure(
                f"line {entry.line}: {_wrong_root(script, root, value)}", entry.line
            )
        failure = every_rank_failure(script, entry, "broadcast callback") or _sometimes(
            script, entry
        )
        if failure:
            return failure
    return None


def _sometimes(script, entry):
    """A Failure if the broadcast is added only under a condition (the same on every worker,
    or every_rank_failure would have said so) other than one on the number of workers."""
    for test, polarity in entry.guards:
        if script.constant(test) is not None and bool(script.constant(test)) == polarity:
            continue  # `if True:`
        if script.mentions_call(test, SIZE):
            continue  # `if hvd.size() > 1:`: one worker has nobody to copy to
        shown = script.source(test) if polarity else f"not ({script.source(test)})"
        return Failure(
            f"line {entry.line}: the broadcast callback is only added when `{shown}`; every "
            "run needs it: on a fresh start each worker's random initial weights differ, and on "
            "a resume only rank 0 loaded the checkpoint",
            entry.line,
        )
    return None


def _wrong_root(script, root, value):
    if ranks.of(script).rank_kind(root):
        return "the root rank must be the same on every worker: 0, not hvd.rank()"
    if isinstance(value, int):
        return f"it broadcasts from rank {value}; all workers must start from rank 0's weights"
    return f"the root rank must be 0, not `{script.source(root)}`"
