"""Step 1's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case

CASES = [
    Case(1, "init removed", "hvd.init()\n", "\n", False, "never called"),
    Case(
        1,
        "standalone keras module",
        "import horovod.tensorflow.keras as hvd",
        "import horovod.keras as hvd",
        False,
        "standalone Keras",
    ),
    Case(
        1,
        "tensorflow module instead of keras",
        "import horovod.tensorflow.keras as hvd",
        "import horovod.tensorflow as hvd",
        False,
        "import the Keras API",
    ),
    Case(
        1,
        "init after first use",
        ("hvd.init()\n", "verbose = 1 if hvd.rank() == 0 else 0\n"),
        ("\n", "verbose = 1 if hvd.rank() == 0 else 0\nhvd.init()\n"),
        False,
        "before hvd.init()",
        base=3,
    ),
    Case(
        1,
        "no import at all",
        "import horovod.tensorflow.keras as hvd\n",
        "\n",
        False,
        "not imported",
    ),
    Case(
        1,
        "from horovod.tensorflow import keras as hvd",
        "import horovod.tensorflow.keras as hvd",
        "from horovod.tensorflow import keras as hvd",
        True,
        base=12,
    ),
    Case(
        1,
        "another alias everywhere",
        ("import horovod.tensorflow.keras as hvd", "hvd."),
        ("import horovod.tensorflow.keras as horovod_keras", "horovod_keras."),
        True,
        base=12,
        replace_all=True,
    ),
    Case(
        1,
        "no alias, full module path",
        ("import horovod.tensorflow.keras as hvd", "hvd."),
        ("import horovod.tensorflow.keras", "horovod.tensorflow.keras."),
        True,
        base=12,
        replace_all=True,
    ),
    Case(
        1,
        "init from the tensorflow module",
        ("hvd.init()", "import horovod.tensorflow.keras as hvd"),
        (
            "horovod_tf.init()",
            "import horovod.tensorflow as horovod_tf\nimport horovod.tensorflow.keras as hvd",
        ),
        True,
        base=12,
    ),
]
