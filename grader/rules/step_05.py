"""Step 5: every worker starts from rank 0's weights (BroadcastGlobalVariablesCallback(0))."""

from grader.engine import Failure
from grader.rules.common import BROADCAST, callbacks, every_rank_failure, missing_callback
from grader.syntax import argument

STEP = 5
HINT = (
    "Add hvd.callbacks.BroadcastGlobalVariablesCallback with root rank 0 at the start of the "
    "callbacks list, on every worker."
)

LOOKED_FOR = "hvd.callbacks.BroadcastGlobalVariablesCallback(0) on every worker"


def check(script):
    entries, failure = callbacks(script, LOOKED_FOR)
    if failure:
        return failure
    ours = [entry for entry in entries if entry.name == BROADCAST]
    if not ours:
        return missing_callback(script, entries, BROADCAST, "BroadcastGlobalVariablesCallback")
    for entry in ours:
        root = argument(entry.call, "root_rank", 0)
        if root is None:
            return Failure(f"line {entry.line}: give the root rank: 0", entry.line)
        value = script.constant(root)
        if value != 0 or isinstance(value, bool):
            return script.uncalled_failure(root) or Failure(
                f"line {entry.line}: {_wrong_root(script, root, value)}", entry.line
            )
        failure = every_rank_failure(script, entry, "broadcast callback")
        if failure:
            return failure
    return None


def _wrong_root(script, root, value):
    if script.rank_kind(root):
        return "the root rank must be the same on every worker: 0, not hvd.rank()"
    if isinstance(value, int):
        return f"it broadcasts from rank {value}; all workers must start from rank 0's weights"
    return f"the root rank must be 0, not `{script.source(root)}`"
