"""Step 12's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case

CASES = [
    Case(
        12,
        "load without NovoGrad",
        "        custom_optimizers=[tfa.optimizers.NovoGrad],\n",
        "",
        False,
        "custom_optimizers",
    ),
    Case(
        12,
        "another optimizer",
        "tfa.optimizers.NovoGrad(learning_rate=",
        "tfa.optimizers.LAMB(learning_rate=",
        False,
        "not NovoGrad",
    ),
    Case(
        12,
        "NovoGrad not imported",
        "opt = tfa.optimizers.NovoGrad(",
        "opt = NovoGrad(",
        False,
        "not TensorFlow Addons",
    ),
    Case(
        12,
        "imported by name",
        ("import tensorflow_addons as tfa", "tfa.optimizers.NovoGrad"),
        ("from tensorflow_addons.optimizers import NovoGrad", "NovoGrad"),
        True,
        replace_all=True,
    ),
    Case(
        12,
        "another alias",
        ("import tensorflow_addons as tfa", "tfa.optimizers"),
        ("import tensorflow_addons as addons", "addons.optimizers"),
        True,
        replace_all=True,
    ),
]
