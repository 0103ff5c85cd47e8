"""A resumed run's fresh optimizer must make its variables at once (step 8).

When resuming, rank 0's hvd.load_model makes the optimizer's variables as it loads them, and
the workers that build a fresh model must make theirs under the same names before the broadcast
callback matches them by name, with `opt._create_all_weights(model.trainable_variables)`
(measured on Horovod 0.28.1 / TensorFlow 2.15: without it a 2-worker resume hangs in the
broadcast callback). `failure(script)` says whether the script does, on every worker it must.
"""

import ast

from grader.reading import ranks, training
from grader.reading.horovod_optimizer import DISTRIBUTED_OPTIMIZER, KERAS_OPTIMIZERS, LEGACY
from grader.reading.rules.fit import optimizer_call
from grader.reading.rules.workers import unfollowed_note
from grader.reading.syntax import argument, position
from grader.reading.verdicts import Failure, Note, first_verdict

# Why the workers that build a fresh model make their optimizer's variables when resuming;
# step 8's notebook says it in these words.
WHY_WEIGHTS = (
    "rank 0's hvd.load_model makes the optimizer's variables (iter, momentum) as it loads "
    "them; a fresh optimizer makes its own in the first step, named otherwise "
    "(DistributedSGD/iter), and the broadcast callback, which matches variables by name, "
    "waits forever"
)
HOW_WEIGHTS = (
    "opt._create_all_weights(model.trainable_variables) makes them at once, under the names "
    "rank 0 has (it is the private Keras method that load_model calls too)"
)
WEIGHTS_HINT = (
    "In the `else:` branch that builds the fresh model, after model.compile(...), add "
    "`if resume_from_epoch > 0: opt._create_all_weights(model.trainable_variables)` (on its "
    f"own two lines). Without it, {WHY_WEIGHTS}; {HOW_WEIGHTS}."
)
CREATE_WEIGHTS = "_create_all_weights"
MODEL_VARIABLES = ("trainable_variables", "trainable_weights")


# ---- the optimizer's variables on the workers that don't load the checkpoint ---------------
#
# Conditions are judged (Ranks.runs, grader/reading/ranks.py) on rank 0 and on any other worker, when
# resuming (rank 0 loads the checkpoint, the others build a fresh model) and on a fresh run
# (every worker builds a fresh model). The call must run on every other worker when resuming,
# and on a fresh run on every worker or on none, so that all name their variables alike.


def failure(script):
    optimizer, _ = optimizer_call(script)
    name = script.qualified_name(optimizer.func) if optimizer is not None else ""
    if name.startswith(KERAS_OPTIMIZERS) and not name.startswith(LEGACY):
        return Note(
            f"line {optimizer.lineno}: it checks how the workers that build a fresh model make "
            "their optimizer's variables for tf.keras.optimizers.legacy optimizers (and "
            f"NovoGrad); {script.source(optimizer.func)} is a new Keras optimizer, which has no "
            "_create_all_weights",
            optimizer.lineno,
        )
    written = script.calls_by_method.get(CREATE_WEIGHTS, [])
    calls = [c for c in written if not script.in_function(c)]
    if not calls and written:
        return unfollowed_note(
            script,
            written[0],
            f"`{script.source(written[0])}`",
            "it on every worker that builds a fresh model when resuming",
        )
    for call in calls:
        failure = _loader_crash(script, call)
        if failure:
            return failure
    verdicts = [_weights_call_failure(script, call) for call in calls]
    if None in verdicts or any(isinstance(verdict, Note) for verdict in verdicts):
        fresh_runs = [lambda call=call: _fresh_run_failure(script, call) for call in calls]
        return first_verdict(*fresh_runs, lambda: next(filter(None, verdicts), None))
    if verdicts:
        return verdicts[0]
    line = _fresh_compile_line(script)
    return Failure(
        (f"line {line}: " if line else "")
        + "when resuming, the workers that build a fresh model never make their optimizer's "
        f"variables: {WHY_WEIGHTS}",
        line,
        WEIGHTS_HINT,
    )


def _loader_crash(script, call):
    """A Failure if `call` may run on rank 0 after loading, where its optimizer name is unset."""
    receiver = call.func.value
    if not isinstance(receiver, ast.Name) or ranks.of(script).runs(call, rank0=True) is False:
        return None
    if _is_model_optimizer(script.resolve(receiver)):
        return None  # the loaded model's optimizer: its variables exist, making them is a no-op
    reaching = script.bindings_before(receiver)
    runs = ranks.of(script).runs
    if not reaching or any(runs(b.statement, rank0=True) is not False for b in reaching):
        return None
    return Failure(
        f"line {call.lineno}: `{script.source(call)}` also runs on rank 0 when it loads the "
        f"checkpoint, where `{receiver.id}` is never assigned (a NameError): call it only on "
        "the workers that build a fresh model, in the `else:` branch",
        call.lineno,
        WEIGHTS_HINT,
    )


def _weights_call_failure(script, call):
    """None if `call` makes the fresh optimizer's variables on every other worker when resuming."""
    line, shown = call.lineno, f"`{script.source(call)}`"
    runs = ranks.of(script).runs(call, rank0=False)
    if runs is False:
        return Failure(
            f"line {line}: {shown} never runs on the workers that build a fresh model when "
            "resuming: call it there, in the `else:` branch after model.compile(...)",
            line,
            WEIGHTS_HINT,
        )
    if runs is None:
        return Note(
            f"line {line}: it can't tell whether {shown} runs on every worker that builds a "
            "fresh model when resuming; it looked for it in the `else:` branch, under "
            "`if resume_from_epoch > 0:`",
            line,
        )
    model, failure = _fresh_optimizer(script, call)
    if failure:
        return failure
    return _variables_failure(script, call, model) or _fresh_run_failure(script, call)


def _fresh_run_failure(script, call):
    """A Failure unless, with nothing to resume, `call` runs on every worker or on none."""
    on_rank0 = ranks.of(script).runs(call, rank0=True, resuming=False)
    on_others = ranks.of(script).runs(call, rank0=False, resuming=False)
    if on_rank0 == on_others and on_rank0 is not None:
        return None
    line, shown = call.lineno, f"`{script.source(call)}`"
    if on_rank0 is None or on_others is None:
        return Note(
            f"line {line}: it can't tell whether {shown} runs on every worker or on none on a "
            "fresh run (nothing to resume); it looked for `if resume_from_epoch > 0:` around it",
            line,
        )
    where = "it runs on " + ("rank 0 only" if on_rank0 else "every worker but rank 0")
    return Failure(
        f"line {line}: on a fresh run (nothing to resume) {where}, so the workers' optimizer "
        f"variables get different names and the broadcast waits forever: run {shown} only when "
        "resuming (`if resume_from_epoch > 0:`)",
        line,
        WEIGHTS_HINT,
    )


def _fresh_optimizer(script, call):
    """(the name of the model whose optimizer `call` is on, None), or (None, a Failure)."""
    line, receiver = call.lineno, call.func.value
    if isinstance(receiver, ast.Name) and not script.bindings_before(receiver):
        return None, Failure(
            f"line {line}: `{receiver.id}` is not assigned yet where "
            f"`{script.source(call)}` runs (a NameError): call it after "
            "opt = hvd.DistributedOptimizer(...)",
            line,
            WEIGHTS_HINT,
        )
    value = script.resolve(receiver)
    if _is_model_optimizer(value):
        model = value.value.id
        compiled = [
            c
            for c in training.of(script).compile_calls()
            if isinstance(c.func.value, ast.Name)
            and c.func.value.id == model
            and position(c) < position(call)
            and ranks.of(script).runs(c, rank0=False) is not False
        ]
        if not compiled:
            return None, Failure(
                f"line {line}: `{script.source(receiver)}` is None until model.compile(...) "
                "sets it (an AttributeError): call this after model.compile(...)",
                line,
                WEIGHTS_HINT,
            )
        return model, None
    for compile_call in training.of(script).compile_calls():
        given = argument(compile_call, "optimizer", 0)
        if given is not None and script.resolve(given) is value:
            target = compile_call.func.value
            return (target.id if isinstance(target, ast.Name) else None), None
    for wrap in script.calls_to(DISTRIBUTED_OPTIMIZER):
        inner = argument(wrap, "optimizer", 0)
        if inner is not None and script.resolve(inner) is value:
            return None, Failure(
                f"line {line}: `{script.source(receiver)}` here is the optimizer that "
                "hvd.DistributedOptimizer(...) wraps, but the wrapper given to model.compile(...) "
                "is a new optimizer with variables of its own, so these are lost: call it on the "
                "wrapper (or model.optimizer), once the wrapper exists",
                line,
                WEIGHTS_HINT,
            )
    if not isinstance(value, ast.Call):
        return None, Note(
            f"line {line}: it can't tell which optimizer `{script.source(receiver)}` is; it "
            "looked for the one given to model.compile(...) (opt, the hvd.DistributedOptimizer) "
            "or model.optimizer",
            line,
        )
    return None, Failure(
        f"line {line}: `{script.source(call)}` is not called on the optimizer given to "
        "model.compile(...): use that one (opt, the hvd.DistributedOptimizer) or model.optimizer",
        line,
        WEIGHTS_HINT,
    )


def _variables_failure(script, call, model):
    given = argument(call, "var_list", 0)
    value = script.resolve(given) if given is not None else None
    if (
        isinstance(value, ast.Attribute)
        and value.attr in MODEL_VARIABLES
        and isinstance(value.value, ast.Name)
        and (model is None or value.value.id == model)
    ):
        return None
    shown = f"`{script.source(given)}`" if given is not None else "nothing"
    return Failure(
        f"line {call.lineno}: `{script.source(call.func)}(...)` gets {shown}: give it the fresh "
        "model's trainable_variables, as hvd.load_model does on rank 0 (other variables would "
        "get optimizer slots that rank 0 doesn't have)",
        call.lineno,
        WEIGHTS_HINT,
    )


def _is_model_optimizer(value) -> bool:
    return (
        isinstance(value, ast.Attribute)
        and value.attr == "optimizer"
        and isinstance(value.value, ast.Name)
    )


def _fresh_compile_line(script):
    compiles = training.of(script).compile_calls()
    for call in compiles:
        runs = ranks.of(script).runs
        if runs(call, rank0=False) and runs(call, rank0=True) is False:
            return call.lineno
    return compiles[0].lineno if compiles else None
