"""Step 5's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case
from grader_cases.mistakes.edits import BROADCAST_ITEM, LIST_END, RANK0_BLOCK

CASES = [
    Case(
        5,
        "root rank 1",
        "BroadcastGlobalVariablesCallback(0)",
        "BroadcastGlobalVariablesCallback(1)",
        False,
        "rank 1",
    ),
    Case(
        5,
        "root is the own rank",
        "BroadcastGlobalVariablesCallback(0)",
        "BroadcastGlobalVariablesCallback(hvd.rank())",
        False,
        "same on every worker",
    ),
    Case(
        5, "missing", BROADCAST_ITEM, "", False, "no hvd.callbacks.BroadcastGlobalVariablesCallback"
    ),
    Case(
        5,
        "created, not passed",
        (BROADCAST_ITEM, "callbacks = [\n"),
        ("", "broadcast = hvd.callbacks.BroadcastGlobalVariablesCallback(0)\ncallbacks = [\n"),
        False,
        "never reaches",
    ),
    Case(
        5,
        "only on rank 0",
        (BROADCAST_ITEM, RANK0_BLOCK),
        (
            "",
            "\nif hvd.rank() == 0:\n    callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))\n    callbacks.append(",
        ),
        False,
        "every worker must run it",
        base=9,
    ),
    Case(
        5,
        "keyword root_rank",
        "BroadcastGlobalVariablesCallback(0)",
        "BroadcastGlobalVariablesCallback(root_rank=0)",
        True,
        base=12,
    ),
    Case(
        5,
        "inserted later, imported by name",
        (BROADCAST_ITEM, LIST_END, "import horovod.tensorflow.keras as hvd\n"),
        (
            "",
            LIST_END + "callbacks.insert(0, BroadcastGlobalVariablesCallback(root_rank=0))\n",
            "import horovod.tensorflow.keras as hvd\n"
            "from horovod.tensorflow.keras.callbacks import BroadcastGlobalVariablesCallback\n",
        ),
        True,
        base=12,
    ),
]
