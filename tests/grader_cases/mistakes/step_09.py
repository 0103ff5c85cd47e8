"""Step 9's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case
from grader_cases.mistakes.edits import BOARD_APPEND, CHECKPOINT_APPEND, LIST_END, RANK0_BLOCK

CASES = [
    Case(
        9,
        "TensorBoard on every rank",
        BOARD_APPEND,
        BOARD_APPEND.lstrip(),
        False,
        "TensorBoard(...) runs on every worker",
    ),
    Case(
        9,
        "local rank",
        RANK0_BLOCK,
        RANK0_BLOCK.replace("hvd.rank()", "hvd.local_rank()"),
        False,
        "one worker per machine",
    ),
    Case(9, "inverted", RANK0_BLOCK, RANK0_BLOCK.replace("==", "!="), False, "except rank 0"),
    Case(9, "checkpoint dropped", CHECKPOINT_APPEND, "", False, "no ModelCheckpoint"),
    Case(
        9,
        "conditional list",
        (RANK0_BLOCK + "tf.keras.callbacks.ModelCheckpoint(checkpoint_format))\n" + BOARD_APPEND),
        (
            "\ncallbacks += (\n    [tf.keras.callbacks.ModelCheckpoint(checkpoint_format), "
            "tf.keras.callbacks.TensorBoard(args.log_dir)]\n    if hvd.rank() == 0\n    else []\n)\n"
        ),
        True,
        base=12,
    ),
    Case(
        9,
        "guarded by verbose",
        RANK0_BLOCK,
        RANK0_BLOCK.replace("hvd.rank() == 0", "verbose"),
        True,
        base=12,
    ),
    Case(
        9,
        "starred conditional in the list",
        (
            RANK0_BLOCK + "tf.keras.callbacks.ModelCheckpoint(checkpoint_format))\n" + BOARD_APPEND,
            LIST_END,
            "import tensorflow as tf\n",
        ),
        (
            "\n",
            "    throughput,\n    *(\n        [ModelCheckpoint(checkpoint_format), TensorBoard(args.log_dir)]\n"
            "        if hvd.rank() == 0\n        else []\n    ),\n]\n",
            "import tensorflow as tf\nfrom tensorflow.keras.callbacks import ModelCheckpoint, TensorBoard\n",
        ),
        True,
        base=12,
    ),
]
