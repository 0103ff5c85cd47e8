"""Step 8: rank 0 finds the checkpoint, broadcasts its epoch, and alone loads it.

When resuming, the workers that build a fresh model must also make their optimizer's variables
at once, with `opt._create_all_weights(model.trainable_variables)`: WHY_WEIGHTS says why, in
the words notebook 08 uses (measured on Horovod 0.28.1 / TensorFlow 2.15: without it a 2-worker
resume hangs in the broadcast callback).
"""

import ast

from grader.engine import Failure, Note, first_verdict
from grader.rules.common import (
    DISTRIBUTED_OPTIMIZER,
    KERAS_LOAD_MODEL,
    NO_FIT,
    collective_failure,
    optimizer_call,
    rank0_guard_failure,
)
from grader.syntax import BROADCASTS, COLLECTIVES, HVD, TF, argument, position

STEP = 8
# Why the workers that build a fresh model make their optimizer's variables when resuming;
# notebook 08 says it in these words.
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
HINT = (
    "Only rank 0 calls restart_epoch; broadcast the epoch it found with hvd.broadcast(..., "
    "root_rank=0) and give the result to model.fit as initial_epoch. Only rank 0 loads the "
    "checkpoint, with hvd.load_model (legacy_opts=True for a legacy Keras optimizer); the "
    "other workers build a fresh model and, when resuming, make its optimizer's variables: "
    f"{HOW_WEIGHTS}. Without it, {WHY_WEIGHTS}."
)
WEIGHTS_HINT = (
    "In the `else:` branch that builds the fresh model, after model.compile(...), add "
    "`if resume_from_epoch > 0: opt._create_all_weights(model.trainable_variables)` (on its "
    f"own two lines). Without it, {WHY_WEIGHTS}; {HOW_WEIGHTS}."
)
BROADCAST_HANG = (
    "a broadcast completes only when every worker calls it, so the workers that call it wait "
    "forever for the others (training hangs): call it on every worker"
)
CREATE_WEIGHTS = "_create_all_weights"
MODEL_VARIABLES = ("trainable_variables", "trainable_weights")
LOAD_MODEL = f"{HVD}.load_model"


def check(script):
    fit = script.fit_call()
    if fit is None:
        return Failure(NO_FIT)
    return first_verdict(
        lambda: _finding_failure(script),
        lambda: _broadcast_failure(script, fit),
        lambda: _loading_failure(script),
    )


def _finding_failure(script):
    finders = [c for c in script.calls_to("restart_epoch") if not script.in_function(c)]
    if not finders:
        return Failure("restart_epoch(...) is never called: rank 0 must look for checkpoints")
    return first_verdict(
        *(
            lambda call=call: rank0_guard_failure(
                script,
                script.guards(call),
                call.lineno,
                "restart_epoch(...)",
                "; the others get the epoch from rank 0 by broadcast",
            )
            for call in finders
        )
    )


def _broadcast_failure(script, fit):
    initial_epoch = argument(fit, "initial_epoch", 11)
    if initial_epoch is None:
        return Failure(f"line {fit.lineno}: model.fit(...) gets no initial_epoch", fit.lineno)
    broadcasts = [c for c in script.calls_to(*BROADCASTS) if not script.in_function(c)]
    if not broadcasts:
        misspelled = script.calls_to(f"{HVD}.broadcast_object")
        if misspelled:
            return Failure(
                f"line {misspelled[0].lineno}: horovod.tensorflow.keras has no broadcast_object "
                "(horovod.tensorflow has): use hvd.broadcast(value, root_rank=0, name=...)",
                misspelled[0].lineno,
            )
        return Failure(
            "the epoch found on rank 0 is never broadcast, so the other workers start from "
            "epoch 0: broadcast it with hvd.broadcast(..., root_rank=0) and use the result"
        )
    for call in _other_broadcasts(script):
        verdict = collective_failure(
            script, call, f"{script.source(call.func)}(...)", BROADCAST_HANG
        )
        if verdict:
            return verdict
    for call in broadcasts:
        line = call.lineno
        verdict = collective_failure(script, call, "hvd.broadcast(...)", BROADCAST_HANG)
        if verdict:
            return verdict
        is_object = _is_object_broadcast(script, call)
        root = argument(call, "root_rank", 1)
        if root is None:
            root_value = 0 if is_object else None  # broadcast_object's root_rank defaults to 0
        else:
            root_value = script.constant(root)
        if root_value != 0 or isinstance(root_value, bool):
            failure = script.uncalled_failure(root)
            if failure:
                return failure
            shown = script.source(root) if root is not None else "nothing"
            return Failure(
                f"line {line}: broadcast from rank 0, the one that found the checkpoint: "
                f"root_rank=0, not {shown}",
                line,
            )
        value = argument(call, "obj" if is_object else "value", 0)
        if value is None or not script.mentions_call(value, "restart_epoch"):
            shown = script.source(value) if value is not None else "nothing"
            return Failure(
                f"line {line}: the broadcast sends `{shown}`, not the epoch that "
                "restart_epoch(...) found on rank 0",
                line,
            )
        if script.is_discarded(call):
            return Failure(
                f"line {line}: hvd.broadcast(...) returns rank 0's value, but the result is "
                "thrown away: assign it, and give it to model.fit as initial_epoch",
                line,
            )
    if not script.mentions_call(initial_epoch, *BROADCASTS):
        return Failure(
            f"line {fit.lineno}: model.fit(initial_epoch=...) gets "
            f"`{script.source(initial_epoch)}` as it was before the broadcast: assign the "
            "broadcast's result to it",
            fit.lineno,
        )
    return None


def _other_broadcasts(script):
    """Horovod's other broadcasts at the top level: each needs every worker too."""
    return [
        call
        for call in script.calls_to(*COLLECTIVES)
        if "broadcast" in script.qualified_name(call.func)
        and script.qualified_name(call.func) not in BROADCASTS
        and not script.in_function(call)
    ]


def _is_object_broadcast(script, call):
    return script.qualified_name(call.func).endswith(".broadcast_object")


def _loading_failure(script):
    keras_loads = script.calls_to(*KERAS_LOAD_MODEL)
    if keras_loads:
        line = keras_loads[0].lineno
        return Failure(
            f"line {line}: {script.source(keras_loads[0].func)} returns the optimizer unwrapped: "
            "load with hvd.load_model(...), which wraps it in DistributedOptimizer",
            line,
        )
    loads = [c for c in script.calls_to(LOAD_MODEL) if not script.in_function(c)]
    if not loads:
        return Failure("the checkpoint is never loaded: hvd.load_model(...) on rank 0")
    checks = []
    for call in loads:
        checks.append(
            lambda call=call: rank0_guard_failure(
                script,
                script.guards(call),
                call.lineno,
                "loading the checkpoint",
                "; the broadcast callback copies its weights and optimizer state to the others",
            )
        )
        checks.append(lambda call=call: _legacy_failure(script, call))
    checks.append(lambda: _others_need_a_model(script))
    checks.append(lambda: _optimizer_weights_failure(script))
    return first_verdict(*checks)


def _legacy_failure(script, load):
    """legacy_opts must say which Keras optimizers the checkpoint holds (Horovod 0.28.1
    rebuilds them from keras.optimizers.legacy with it, from keras.optimizers without)."""
    optimizer, _ = optimizer_call(script)
    if optimizer is None:
        return None
    name = script.qualified_name(optimizer.func)
    legacy = script.constant(argument(load, "legacy_opts", 4))
    if name.startswith(f"{TF}.keras.optimizers.legacy."):
        if legacy is not True:
            return Failure(
                f"line {load.lineno}: pass legacy_opts=True: the checkpoint holds a "
                "tf.keras.optimizers.legacy optimizer, and without it hvd.load_model fails "
                '("decay is deprecated in the new Keras optimizer")',
                load.lineno,
            )
    elif name.startswith(f"{TF}.keras.optimizers.") and legacy is True:
        return Failure(
            f"line {load.lineno}: drop legacy_opts=True: the checkpoint holds a new Keras "
            f"optimizer ({script.source(optimizer.func)}), and legacy_opts=True makes "
            "hvd.load_model rebuild it as a legacy one, which rejects its settings "
            '("Unexpected keyword argument passed to optimizer: weight_decay")',
            load.lineno,
        )
    return None


def _others_need_a_model(script):
    fit = script.fit_call()
    receiver = fit.func.value if isinstance(fit.func, ast.Attribute) else None
    if not isinstance(receiver, ast.Name):
        return None
    reaching = script.bindings_before(receiver)
    if reaching and all(script.rank0_only(b.statement) for b in reaching):
        return Failure(
            f"line {reaching[0].statement.lineno}: only rank 0 gets a model; build and compile "
            "one for the other workers too (in the `else:` branch)",
            reaching[0].statement.lineno,
        )
    return None


# ---- the optimizer's variables on the workers that don't load the checkpoint ---------------
#
# Conditions are judged (script.runs, grader/ranks.py) on rank 0 and on any other worker, when
# resuming (rank 0 loads the checkpoint, the others build a fresh model) and on a fresh run
# (every worker builds a fresh model). The call must run on every other worker when resuming,
# and on a fresh run on every worker or on none, so that all name their variables alike.


def _optimizer_weights_failure(script):
    optimizer, _ = optimizer_call(script)
    name = script.qualified_name(optimizer.func) if optimizer is not None else ""
    if name.startswith(f"{TF}.keras.optimizers.") and ".legacy." not in name:
        return Note(
            f"line {optimizer.lineno}: it checks how the workers that build a fresh model make "
            "their optimizer's variables for tf.keras.optimizers.legacy optimizers (and "
            f"NovoGrad); {script.source(optimizer.func)} is a new Keras optimizer, which has no "
            "_create_all_weights",
            optimizer.lineno,
        )
    calls = [c for c in script.calls_by_method.get(CREATE_WEIGHTS, []) if not script.in_function(c)]
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
    if not isinstance(receiver, ast.Name) or script.runs(call, rank0=True) is False:
        return None
    if _is_model_optimizer(script.resolve(receiver)):
        return None  # the loaded model's optimizer: its variables exist, making them is a no-op
    reaching = script.bindings_before(receiver)
    if not reaching or any(script.runs(b.statement, rank0=True) is not False for b in reaching):
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
    runs = script.runs(call, rank0=False)
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
    on_rank0 = script.runs(call, rank0=True, resuming=False)
    on_others = script.runs(call, rank0=False, resuming=False)
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
            for c in script.compile_calls()
            if isinstance(c.func.value, ast.Name)
            and c.func.value.id == model
            and position(c) < position(call)
            and script.runs(c, rank0=False) is not False
        ]
        if not compiled:
            return None, Failure(
                f"line {line}: `{script.source(receiver)}` is None until model.compile(...) "
                "sets it (an AttributeError): call this after model.compile(...)",
                line,
                WEIGHTS_HINT,
            )
        return model, None
    for compile_call in script.compile_calls():
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
    compiles = script.compile_calls()
    for call in compiles:
        if script.runs(call, rank0=False) and script.runs(call, rank0=True) is False:
            return call.lineno
    return compiles[0].lineno if compiles else None
