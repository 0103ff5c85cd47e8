"""Step 12: the optimizer is TensorFlow Addons' NovoGrad, and checkpoints load with it."""

import ast

from grader.reading import presets
from grader.reading.horovod_optimizer import LOAD_MODEL
from grader.reading.rules.fit import optimizer_call
from grader.reading.syntax import TFA, argument
from grader.reading.verdicts import Failure

STEP = 12
HINT = (
    "Create the optimizer with tfa.optimizers.NovoGrad (import tensorflow_addons as tfa) "
    "instead of SGD, with the scaled learning rate, and name it for hvd.load_model: "
    "custom_optimizers=[tfa.optimizers.NovoGrad]."
)
NOVOGRAD = f"{TFA}.optimizers.NovoGrad"
# The keywords NovoGrad accepts (TensorFlow Addons 0.23: its own, and those of Keras's legacy
# OptimizerV2); any other is a TypeError when it is made.
NOVOGRAD_KEYWORDS = {
    "learning_rate",
    "beta_1",
    "beta_2",
    "epsilon",
    "weight_decay",
    "grad_averaging",
    "amsgrad",
    "name",
    "clipnorm",
    "clipvalue",
    "global_clipnorm",
    "lr",
    "decay",
}


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
    failure = _keyword_failure(script, optimizer) or _unimported_failure(script, optimizer.func)
    if failure:
        return failure
    for load in script.calls_to(LOAD_MODEL):
        failure = load_failure(script, load)
        if failure:
            return failure
    return _preset_rate_failure(script)


# The CPU preset's base rate: SGD's before step 12, half of it for NovoGrad (step 12's notebook).
SGD_RATE, NOVOGRAD_RATE = 0.0125, 0.00625


def _preset_rate_failure(script):
    """The cpu preset's base_lr is halved for NovoGrad: a kept 0.0125 is SGD's."""
    for name, items in presets.presets(script):
        value = items.get("base_lr")
        if name == "cpu" and value is not None and script.constant(value) == SGD_RATE:
            return Failure(
                f"line {value.lineno}: the cpu preset keeps SGD's base_lr, {SGD_RATE}: "
                "NovoGrad's steps are normalized per layer, bigger than SGD's at one rate, so "
                f"it takes half: base_lr={NOVOGRAD_RATE}",
                value.lineno,
            )
    return None


def _keyword_failure(script, optimizer):
    """NovoGrad (a legacy Keras optimizer underneath) refuses keywords it doesn't know, such as
    SGD's momentum: TypeError when the optimizer is made."""
    for keyword in optimizer.keywords:
        if keyword.arg is not None and keyword.arg not in NOVOGRAD_KEYWORDS:
            line = optimizer.lineno
            return Failure(
                f"line {line}: NovoGrad has no {keyword.arg}= setting (SGD's momentum is "
                "NovoGrad's beta_1): creating it fails with TypeError (\"Unexpected keyword "
                f'argument passed to optimizer: {keyword.arg}"): drop it',
                line,
            )
    return None


def _unimported_failure(script, *uses):
    """A Failure if a name a use needs is imported only where that import has not run."""
    for use in uses:
        for node in ast.walk(use):
            if isinstance(node, ast.Name) and script.import_reaches(node) is False:
                return Failure(
                    f"line {node.lineno}: `{node.id}` is not imported where this runs (its "
                    "import is further down, in a function, or in another branch of the `if`): "
                    f"NameError: import it with the other imports at the top",
                    node.lineno,
                )
    return None


def load_failure(script, load):
    """What hvd.load_model needs for a NovoGrad checkpoint (Horovod 0.28.1): the class in
    custom_optimizers, a list, which it wraps in DistributedOptimizer (legacy_opts is no matter:
    it only picks among Keras's own optimizers)."""
    line = load.lineno
    customs = argument(load, "custom_optimizers", 1)
    if customs is not None:
        failure = _unimported_failure(script, customs)
        if failure:
            return failure
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
