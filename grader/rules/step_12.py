"""Step 12: the optimizer is TensorFlow Addons' NovoGrad, and checkpoints load with it."""

from grader.engine import Failure
from grader.rules.common import optimizer_call
from grader.syntax import HVD, TFA, argument

STEP = 12
HINT = (
    "Create the optimizer with tfa.optimizers.NovoGrad (import tensorflow_addons as tfa) "
    "instead of SGD, with the scaled learning rate, and name it for hvd.load_model: "
    "custom_optimizers=[tfa.optimizers.NovoGrad]."
)
NOVOGRAD = f"{TFA}.optimizers.NovoGrad"


def check(script):
    optimizer, failure = optimizer_call(script)
    if failure:
        return failure
    line = optimizer.lineno
    name = script.qualified_name(optimizer.func)
    if name != NOVOGRAD:
        if name.endswith("NovoGrad"):
            return Failure(
                f"line {line}: `{script.source(optimizer.func)}` is not TensorFlow Addons' "
                "NovoGrad: import tensorflow_addons as tfa and use tfa.optimizers.NovoGrad",
                line,
            )
        return Failure(
            f"line {line}: the optimizer is {name.rsplit('.', 1)[-1]}, not NovoGrad: switch to "
            "tfa.optimizers.NovoGrad, with the scaled learning rate",
            line,
        )
    for load in script.calls_to(f"{HVD}.load_model"):
        customs = argument(load, "custom_optimizers", 1)
        if customs is None or not script.mentions(
            customs, lambda node: script.qualified_name(node) == NOVOGRAD
        ):
            return Failure(
                f"line {load.lineno}: hvd.load_model can't rebuild a NovoGrad checkpoint "
                "unless it knows the class: custom_optimizers=[tfa.optimizers.NovoGrad]",
                load.lineno,
            )
    return None
