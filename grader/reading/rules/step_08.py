"""Step 8: rank 0 finds the checkpoint, broadcasts its epoch, and alone loads it.

When resuming, the workers that build a fresh model must also make their optimizer's variables
at once, with `opt._create_all_weights(model.trainable_variables)`: WHY_WEIGHTS says why, in
the words step 8's notebook uses (measured on Horovod 0.28.1 / TensorFlow 2.15: without it a 2-worker
resume hangs in the broadcast callback).
"""

import ast

from grader.reading import ranks, training
from grader.reading.horovod_collectives import (
    BROADCAST_COPIES,
    BROADCASTS,
    COLLECTIVES,
    WAITS,
    is_broadcast,
)
from grader.reading.horovod_optimizer import KERAS_LOAD_MODEL, KERAS_OPTIMIZERS, LEGACY, LOAD_MODEL
from grader.reading.rules import optimizer_weights, step_12, uncalled
from grader.reading.rules.fit import NO_FIT, optimizer_call
from grader.reading.rules.optimizer_weights import HOW_WEIGHTS, WEIGHTS_HINT, WHY_WEIGHTS  # noqa: F401
from grader.reading.rules.workers import collective_failure, rank0_guard_failure, unfollowed_note
from grader.reading.syntax import HVD, argument
from grader.reading.verdicts import Failure, Note, first_verdict

STEP = 8
HINT = (
    "Only rank 0 calls restart_epoch; broadcast the epoch it found with hvd.broadcast(..., "
    "root_rank=0) and give the result to model.fit as initial_epoch. Only rank 0 loads the "
    "checkpoint, with hvd.load_model (legacy_opts=True for a legacy Keras optimizer); the "
    "other workers build a fresh model and, when resuming, make its optimizer's variables: "
    f"{HOW_WEIGHTS}. Without it, {WHY_WEIGHTS}."
)
BROADCAST_HANG = f"a broadcast {WAITS}: call it on every worker"


def check(script):
    fit = training.of(script).fit_call()
    if fit is None:
        return Failure(NO_FIT)
    return first_verdict(
        lambda: _finding_failure(script),
        lambda: _broadcast_failure(script, fit),
        lambda: _loading_failure(script),
    )


def _finding_failure(script):
    reached = script.calls_reached("restart_epoch")
    finders = [(call, chain) for call, chain in reached if chain is not None]
    if not finders:
        if reached:
            line = reached[0][0].lineno
            return Note(
                f"line {line}: restart_epoch(...) is in a function the grader can't tell when it "
                "runs (it follows functions the script calls by name); it looked for it on "
                "rank 0 only",
                line,
            )
        return Failure("restart_epoch(...) is never called: rank 0 must look for checkpoints")
    return first_verdict(
        *(
            lambda call=call, chain=chain: rank0_guard_failure(
                script,
                script.guards_through(call, chain),
                call.lineno,
                "restart_epoch(...)",
                "; the others get the epoch from rank 0 by broadcast",
            )
            for call, chain in finders
        )
    )


# Collectives other than a broadcast that can give every rank rank 0's epoch.
AGREEING = tuple(
    f"{module}.{name}"
    for module in (HVD, "horovod.tensorflow")
    for name in ("allreduce", "allgather", "allgather_object")
)


def _broadcast_failure(script, fit):
    initial_epoch = script.argument(fit, "initial_epoch", 11)
    if initial_epoch is None and script.unpacks_unknown(fit):
        return Note(
            f"line {fit.lineno}: model.fit(...) gets arguments the grader can't read "
            "(**...): it can't tell whether initial_epoch is among them",
            fit.lineno,
        )
    if initial_epoch is None:
        return Failure(f"line {fit.lineno}: model.fit(...) gets no initial_epoch", fit.lineno)
    broadcasts = [c for c in script.calls_to(*BROADCASTS) if not script.in_function(c)]
    if not broadcasts:
        return _no_broadcast_verdict(script)
    for call in _other_broadcasts(script):
        verdict = collective_failure(
            script, call, f"{script.source(call.func)}(...)", BROADCAST_HANG
        )
        if verdict:
            return verdict
    for call in broadcasts:
        verdict = _epoch_broadcast_failure(script, call)
        if verdict:
            return verdict
    if not script.mentions_call(initial_epoch, *BROADCASTS):
        return Failure(
            f"line {fit.lineno}: model.fit(initial_epoch=...) gets "
            f"`{script.source(initial_epoch)}` as it was before the broadcast: assign the "
            "broadcast's result to it",
            fit.lineno,
        )
    return None


def _no_broadcast_verdict(script):
    """No broadcast at the top level: a misspelled one, another collective that may agree the
    epoch, one inside a function (the grader can't tell), or none at all."""
    misspelled = script.calls_to(f"{HVD}.broadcast_object")
    if misspelled:
        return Failure(
            f"line {misspelled[0].lineno}: horovod.tensorflow.keras has no broadcast_object "
            "(horovod.tensorflow has): use hvd.broadcast(value, root_rank=0, name=...)",
            misspelled[0].lineno,
        )
    agreeing = [
        c
        for c in script.calls_to(*AGREEING)
        if script.mentions_call(c, "restart_epoch", through_functions=True)
    ]
    if agreeing:  # another collective may agree the epoch (op=hvd.Max); the run decides
        return Note(
            f"line {agreeing[0].lineno}: the epoch restart_epoch found goes through "
            f"{script.source(agreeing[0].func)}(...), not a broadcast from rank 0; the "
            "grader can't tell whether every rank ends with rank 0's epoch (hvd.Max does, "
            "an average does not)",
            agreeing[0].lineno,
        )
    inside = [c for c in script.calls_to(*BROADCASTS) if script.in_function(c)]
    if inside:
        return Note(
            f"line {inside[0].lineno}: the broadcast is inside a function, and the grader "
            "can't tell whether its result reaches model.fit(initial_epoch=...); it looked "
            "for hvd.broadcast(..., root_rank=0) of the epoch restart_epoch found",
            inside[0].lineno,
        )
    return Failure(
        "the epoch found on rank 0 is never broadcast, so the other workers start from "
        "epoch 0: broadcast it with hvd.broadcast(..., root_rank=0) and use the result"
    )


def _epoch_broadcast_failure(script, call):
    """What is wrong with one top-level broadcast of the epoch: every worker must reach it, it
    sends from rank 0 what restart_epoch found, and its result is kept."""
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
        failure = uncalled.failure(script, root)
        if failure:
            return failure
        shown = script.source(root) if root is not None else "nothing"
        return Failure(
            f"line {line}: broadcast from rank 0, the one that found the checkpoint: "
            f"root_rank=0, not {shown}",
            line,
        )
    value = argument(call, "obj" if is_object else "value", 0)
    if value is None or not script.mentions_call(value, "restart_epoch", through_functions=True):
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
    return None


def _other_broadcasts(script):
    """Horovod's other broadcasts at the top level: each needs every worker too."""
    return [
        call
        for call in script.calls_to(*COLLECTIVES)
        if is_broadcast(script.qualified_name(call.func))
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
    reached = script.calls_reached(LOAD_MODEL)
    if not reached:
        written = script.calls_to(LOAD_MODEL)
        if written:  # in a function nothing at the top level calls by name
            return unfollowed_note(
                script, written[0], "hvd.load_model(...)", "the checkpoint loaded on rank 0"
            )
        return Failure("the checkpoint is never loaded: hvd.load_model(...) on rank 0")
    checks = []
    for call, chain in reached:
        if chain is None:
            checks.append(
                lambda call=call: unfollowed_note(
                    script, call, "hvd.load_model(...)", "the checkpoint loaded on rank 0"
                )
            )
            continue
        checks.append(
            lambda call=call, chain=chain: rank0_guard_failure(
                script,
                script.guards_through(call, chain),
                call.lineno,
                "loading the checkpoint",
                f"; the broadcast callback copies {BROADCAST_COPIES} to the others",
            )
        )
        checks.append(lambda call=call: _legacy_failure(script, call))
        checks.append(lambda call=call: _custom_failure(script, call))
    checks.append(lambda: _others_need_a_model(script))
    checks.append(lambda: optimizer_weights.failure(script))
    return first_verdict(*checks)


def _custom_failure(script, load):
    """A NovoGrad checkpoint loads only with custom_optimizers=[tfa.optimizers.NovoGrad]
    (step 12 says how): without it the resume fails ("Unknown optimizer: 'NovoGrad'")."""
    optimizer, _ = optimizer_call(script)
    if optimizer is None or script.qualified_name(optimizer.func) != step_12.NOVOGRAD:
        return None
    return step_12.load_failure(script, load)


def _legacy_failure(script, load):
    """legacy_opts must say which Keras optimizers the checkpoint holds (Horovod 0.28.1
    rebuilds them from keras.optimizers.legacy with it, from keras.optimizers without)."""
    optimizer, _ = optimizer_call(script)
    if optimizer is None:
        return None
    name = script.qualified_name(optimizer.func)
    legacy = script.constant(argument(load, "legacy_opts", 4))
    if name.startswith(LEGACY):
        if legacy is not True:
            return Failure(
                f"line {load.lineno}: pass legacy_opts=True: the checkpoint holds a "
                "tf.keras.optimizers.legacy optimizer, and without it hvd.load_model fails "
                '("decay is deprecated in the new Keras optimizer")',
                load.lineno,
            )
    elif name.startswith(KERAS_OPTIMIZERS) and legacy is True:
        return Failure(
            f"line {load.lineno}: drop legacy_opts=True: the checkpoint holds a new Keras "
            f"optimizer ({script.source(optimizer.func)}), and legacy_opts=True makes "
            "hvd.load_model rebuild it as a legacy one, which rejects its settings "
            '("Unexpected keyword argument passed to optimizer: weight_decay")',
            load.lineno,
        )
    return None


def _others_need_a_model(script):
    fit = training.of(script).fit_call()
    receiver = fit.func.value if isinstance(fit.func, ast.Attribute) else None
    if not isinstance(receiver, ast.Name):
        return None
    reaching = script.bindings_before(receiver)
    if reaching and all(ranks.of(script).rank0_only(b.statement) for b in reaching):
        return Failure(
            f"line {reaching[0].statement.lineno}: only rank 0 gets a model; build and compile "
            "one for the other workers too (in the `else:` branch)",
            reaching[0].statement.lineno,
        )
    return None
