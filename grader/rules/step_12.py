"""Step 12: the optimizer is TensorFlow Addons' NovoGrad, and checkpoints load with it."""

import ast

from grader.horovod_optimizer import LOAD_MODEL
from grader.rules.fit import optimizer_call
from grader.syntax import TFA, argument
from grader.verdicts import Failure

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
    for load in script.calls_to(LOAD_MODEL):
        failure = _load_failure(script, load)
        if failure:
            return failure
    return None


def _load_failure(script, load):
    """What hvd.load_model needs for a NovoGrad checkpoint (Horovod 0.28.1): the class in
    custom_optimizers, a list, which it wraps in DistributedOptimizer (legacy_opts is no matter:
    it only picks among Keras's own optimizers)."""
    line = load.lineno
    customs = argument(load, "custom_optimizers", 1)
    is_novograd = lambda node: script.qualified_name(node) == NOVOGRAD  # noqa: E731
    if customs is None or not script.mentions(customs, is_novograd):
        objects = argument(load, "custom_objects", 2)
        if objects is not None and script.mentions(objects, is_novograd):
            return Failure(
                f"line {line}: custom_objects hands NovoGrad to Keras as it is, so rank 0's "
                "optimizer comes back unwrapped, without DistributedOptimizer, and never joins "
                "the others' gradient averaging: name it in custom_optimizers=[tfa.optimizers."
                "NovoGrad], which hvd.load_model wraps",
                line,
            )
        return Failure(
            f"line {line}: hvd.load_model can't rebuild a NovoGrad checkpoint unless it knows "
            "the class: custom_optimizers=[tfa.optimizers.NovoGrad]",
            line,
        )
    if not isinstance(script.resolve(customs), (ast.List, ast.Tuple)):
        return Failure(
            f"line {line}: custom_optimizers takes a list of classes, and hvd.load_model loops "
            f"over it (a class alone is not iterable: TypeError): "
            f"custom_optimizers=[{script.source(customs)}]",
            line,
        )
    return None
