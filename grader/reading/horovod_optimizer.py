"""How Horovod wraps an optimizer (Horovod 0.28.1), as the checks model it.

- `hvd.DistributedOptimizer(opt)` returns a new optimizer that averages the gradients of all
  workers at every step; it can't wrap its own wrapper (RecursionError at the first step).
- `hvd.load_model(path, custom_optimizers=[...], legacy_opts=...)` rebuilds the checkpoint's
  optimizer and wraps it in DistributedOptimizer: a class it doesn't know (NovoGrad) must be in
  `custom_optimizers`, a list; `legacy_opts=True` rebuilds from keras.optimizers.legacy.
- Keras's own load_model returns the optimizer unwrapped.

`optimizer_inside(script, expr)` follows a value given to model.compile through the wrappers
to the optimizer it wraps; `is_wrapper` and `known_optimizer` tell what a value is.
"""

from __future__ import annotations

import ast

from grader.reading.syntax import HVD, TF, argument

DISTRIBUTED_OPTIMIZER = f"{HVD}.DistributedOptimizer"
LOAD_MODEL = f"{HVD}.load_model"  # rank 0 may get its DistributedOptimizer from the checkpoint
KERAS_LOAD_MODEL = (
    f"{TF}.keras.models.load_model",
    f"{TF}.keras.saving.load_model",
    f"{TF}.saved_model.load",
)
LEGACY = f"{TF}.keras.optimizers.legacy."  # what legacy_opts=True rebuilds from
KERAS_OPTIMIZERS = f"{TF}.keras.optimizers."


def is_wrapper(script, value) -> bool:
    """True if `value` is a call of hvd.DistributedOptimizer."""
    return (
        isinstance(value, ast.Call) and script.qualified_name(value.func) == DISTRIBUTED_OPTIMIZER
    )


def known_optimizer(script, value) -> bool:
    """True if `value` is made by an optimizer class the grader knows (Keras, Addons)."""
    if not isinstance(value, ast.Call):
        return False
    name = script.qualified_name(value.func)
    return ".optimizers." in f".{name}." or name.endswith("Optimizer")


def optimizer_inside(script, expr):
    """What `expr` stands for once followed through hvd.DistributedOptimizer(...) (a few deep)
    to the optimizer it wraps; None when a wrapper is given no optimizer."""
    value = script.followed(expr) if expr is not None else None
    for _ in range(3):
        if is_wrapper(script, value):
            inner = argument(value, "optimizer", 0)
            value = script.followed(inner) if inner is not None else None
    return value
