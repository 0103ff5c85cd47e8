"""Step 7's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case
from grader_cases.mistakes.edits import AVERAGE_ITEM, BOARD_APPEND, BROADCAST_ITEM, LIST_END, RANK0_BLOCK

CASES = [
    Case(7, "missing", AVERAGE_ITEM, "", False, "no hvd.callbacks.MetricAverageCallback"),
    Case(
        7,
        "after the checkpoint",
        (AVERAGE_ITEM, BOARD_APPEND),
        ("", BOARD_APPEND + "callbacks.append(hvd.callbacks.MetricAverageCallback())\n"),
        False,
        "ModelCheckpoint on line",
        base=9,
    ),
    Case(
        7,
        "after the warmup",
        (AVERAGE_ITEM, LIST_END),
        ("", "    hvd.callbacks.MetricAverageCallback(),\n" + LIST_END),
        False,
        "LearningRateWarmupCallback on line",
        base=11,
    ),
    Case(
        7,
        "after the Keras scheduler",
        (AVERAGE_ITEM, LIST_END),
        ("", "    hvd.callbacks.MetricAverageCallback(),\n" + LIST_END),
        False,
        "LearningRateScheduler on line",
    ),
    Case(  # independent: the broadcast acts after the first batch, the averaging at epoch ends
        7,
        "before the broadcast",
        (BROADCAST_ITEM, AVERAGE_ITEM),
        ("", AVERAGE_ITEM + BROADCAST_ITEM),
        True,
        "works the same",
    ),
    Case(
        7,
        "only on rank 0",
        (AVERAGE_ITEM, RANK0_BLOCK),
        (
            "",
            "\nif hvd.rank() == 0:\n    callbacks.insert(1, hvd.callbacks.MetricAverageCallback())\n    callbacks.append(",
        ),
        False,
        "every worker",
        base=9,
    ),
    Case(
        7,
        "inserted after the list",
        (AVERAGE_ITEM, RANK0_BLOCK),
        (
            "",
            "\ncallbacks.insert(1, hvd.callbacks.MetricAverageCallback())\nif hvd.rank() == 0:\n    callbacks.append(",
        ),
        True,
        base=12,
    ),
    Case(
        7,
        "in a variable",
        (AVERAGE_ITEM, "callbacks = [\n"),
        (
            "    average_metrics,\n",
            "average_metrics = hvd.callbacks.MetricAverageCallback()\ncallbacks = [\n",
        ),
        True,
        base=12,
    ),
]
