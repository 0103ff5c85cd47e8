"""Step 2's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case
from grader_cases.mistakes.edits import PIN

CASES = [
    Case(2, "pinned by rank", "gpus[hvd.local_rank()]", "gpus[hvd.rank()]", False, "local_rank()"),
    Case(2, "always GPU 0", "gpus[hvd.local_rank()]", "gpus[0]", False, "GPU 0"),
    Case(
        2,
        "no device type",
        PIN,
        "tf.config.set_visible_devices(gpus[hvd.local_rank()])",
        False,
        "device type",
    ),
    Case(
        2,
        "no guard for machines without GPUs",
        "if gpus:\n    tf.config",
        "tf.config",
        False,
        "IndexError",
    ),
    Case(
        2,
        "CUDA_VISIBLE_DEVICES set too late",
        PIN,
        'os.environ["CUDA_VISIBLE_DEVICES"] = str(hvd.local_rank())',
        False,
        "CUDA_VISIBLE_DEVICES",
    ),
    Case(
        2,
        "pinned after TensorFlow started",
        ("if gpus:\n    " + PIN + "\n", "\ntrain_dataset = (\n"),
        ("\n", "\nif gpus:\n    " + PIN + "\ntrain_dataset = (\n"),
        False,
        "already running",
    ),
    Case(
        2,
        "experimental API, list, keyword",
        PIN,
        'tf.config.experimental.set_visible_devices([gpus[hvd.local_rank()]], device_type="GPU")',
        True,
    ),
    Case(
        2,
        "local rank in a variable",
        ("if gpus:\n", "gpus[hvd.local_rank()]"),
        ("local_rank = hvd.local_rank()\nif gpus:\n", "gpus[local_rank]"),
        True,
    ),
]
