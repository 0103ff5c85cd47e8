"""Step 8: rank 0 finds the checkpoint, broadcasts its epoch, and alone loads it.

When resuming, the workers that build a fresh model must also create their optimizer's
variables eagerly (`opt._create_all_weights(model.trainable_variables)`), as rank 0's
hvd.load_model does: otherwise their names differ from rank 0's (`iter:0`, `.../momentum:0`
there; made later under `DistributedSGD/` here) and BroadcastGlobalVariablesCallback, which
matches variables by name, waits forever (measured on Horovod 0.28.1 / TensorFlow 2.15).
"""

import ast

from grader.engine import Failure
from grader.rules.common import (
    DISTRIBUTED_OPTIMIZER,
    KERAS_LOAD_MODEL,
    NO_FIT,
    optimizer_call,
    rank0_guard_failure,
)
from grader.syntax import HVD, MAX_DEPTH, TF, argument, position

STEP = 8
HINT = (
    "Only rank 0 calls restart_epoch; broadcast the epoch it found with hvd.broadcast(..., "
    "root_rank=0) and give the result to model.fit as initial_epoch. Only rank 0 loads the "
    "checkpoint, with hvd.load_model (legacy_opts=True for a legacy Keras optimizer); the "
    "other workers build a fresh model and, when resuming, create its optimizer's variables "
    "with opt._create_all_weights(model.trainable_variables)."
)
WEIGHTS_HINT = (
    "In the `else:` branch that builds the fresh model, after model.compile(...), add "
    "`if resume_from_epoch > 0: opt._create_all_weights(model.trainable_variables)` (on its "
    "own two lines), so these workers make the same variables as rank 0's hvd.load_model."
)
CREATE_WEIGHTS = "_create_all_weights"
MODEL_VARIABLES = ("trainable_variables", "trainable_weights")
BROADCASTS = (
    f"{HVD}.broadcast",
    "horovod.tensorflow.broadcast",
    "horovod.tensorflow.broadcast_object",
)
LOAD_MODEL = f"{HVD}.load_model"


def check(script):
    fit = script.fit_call()
    if fit is None:
        return Failure(NO_FIT)
    return _finding_failure(script) or _broadcast_failure(script, fit) or _loading_failure(script)


def _finding_failure(script):
    finders = [c for c in script.calls_to("restart_epoch") if not script.in_function(c)]
    if not finders:
        return Failure("restart_epoch(...) is never called: rank 0 must look for checkpoints")
    for call in finders:
        failure = rank0_guard_failure(
            script.guard_tests(call),
            call.lineno,
            "restart_epoch(...)",
            "; the others get the epoch from rank 0 by broadcast",
        )
        if failure:
            return failure
    return None


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
    for call in broadcasts:
        line = call.lineno
        is_object = _is_object_broadcast(script, call)
        root = argument(call, "root_rank", 1)
        if root is None:
            root_value = 0 if is_object else None  # broadcast_object's root_rank defaults to 0
        else:
            root_value = script.constant(root)
        if root_value != 0 or isinstance(root_value, bool):
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
    for call in loads:
        failure = rank0_guard_failure(
            script.guard_tests(call),
            call.lineno,
            "loading the checkpoint",
            "; the broadcast callback copies its weights and optimizer state to the others",
        )
        if failure:
            return failure
        failure = _legacy_failure(script, call)
        if failure:
            return failure
    return _others_need_a_model(script) or _optimizer_weights_failure(script)


def _legacy_failure(script, load):
    optimizer, _ = optimizer_call(script)
    if optimizer is None:
        return None
    if not script.qualified_name(optimizer.func).startswith(f"{TF}.keras.optimizers.legacy."):
        return None
    if script.constant(argument(load, "legacy_opts", 4)) is not True:
        return Failure(
            f"line {load.lineno}: pass legacy_opts=True: the checkpoint holds a "
            "tf.keras.optimizers.legacy optimizer, and without it hvd.load_model fails "
            '("decay is deprecated in the new Keras optimizer")',
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
# Conditions are judged on rank 0 and on any other worker, when resuming (the broadcast epoch
# is at least 1: rank 0 loads the checkpoint, the others build a fresh model) and on a fresh
# run (epoch 0: every worker builds a fresh model). A condition then holds (True), doesn't
# (False), or the grader can't tell (None). The call must run on every other worker when
# resuming, and on a fresh run on every worker or on none, so that all name their optimizer's
# variables alike.


def _optimizer_weights_failure(script):
    calls = [c for c in script.calls_by_method.get(CREATE_WEIGHTS, []) if not script.in_function(c)]
    for call in calls:
        failure = _loader_crash(script, call)
        if failure:
            return failure
    failures = []
    for call in calls:
        failure = _weights_call_failure(script, call)
        if failure is None:
            return next(filter(None, (_fresh_run_failure(script, c) for c in calls)), None)
        failures.append(failure)
    if failures:
        return failures[0]
    line = _fresh_compile_line(script)
    return Failure(
        (f"line {line}: " if line else "")
        + "when resuming, the workers that build a fresh model never create their optimizer's "
        "variables, so theirs (made later, under `DistributedSGD/`) are named unlike rank 0's "
        "from hvd.load_model (`iter:0`, `.../momentum:0`), and BroadcastGlobalVariablesCallback, "
        "which matches variables by name, waits for them forever",
        line,
        WEIGHTS_HINT,
    )


def _loader_crash(script, call):
    """A Failure if `call` may run on rank 0 after loading, where its optimizer name is unset."""
    receiver = call.func.value
    if not isinstance(receiver, ast.Name) or _runs(script, call, rank0=True) is False:
        return None
    if _is_model_optimizer(script.resolve(receiver)):
        return None  # the loaded model's optimizer: its variables exist, making them is a no-op
    reaching = script.bindings_before(receiver)
    if not reaching or any(_runs(script, b.statement, rank0=True) is not False for b in reaching):
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
    runs = _runs(script, call, rank0=False)
    if runs is False:
        return Failure(
            f"line {line}: {shown} never runs on the workers that build a fresh model when "
            "resuming: call it there, in the `else:` branch after model.compile(...)",
            line,
            WEIGHTS_HINT,
        )
    if runs is None:
        return Failure(
            f"line {line}: the grader can't tell that {shown} runs on every worker that builds "
            "a fresh model when resuming: put it in the `else:` branch, under "
            "`if resume_from_epoch > 0:`",
            line,
            WEIGHTS_HINT,
        )
    model, failure = _fresh_optimizer(script, call)
    if failure:
        return failure
    return _variables_failure(script, call, model) or _fresh_run_failure(script, call)


def _fresh_run_failure(script, call):
    """A Failure unless, with nothing to resume, `call` runs on every worker or on none."""
    on_rank0 = _runs(script, call, rank0=True, resuming=False)
    on_others = _runs(script, call, rank0=False, resuming=False)
    if on_rank0 == on_others and on_rank0 is not None:
        return None
    line, shown = call.lineno, f"`{script.source(call)}`"
    if on_rank0 is None or on_others is None:
        where = "the grader can't tell whether it runs on every worker or on none"
    else:
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
            and _runs(script, c, rank0=False) is not False
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
        if _runs(script, call, rank0=False) and _runs(script, call, rank0=True) is False:
            return call.lineno
    return compiles[0].lineno if compiles else None


def _runs(script, node, rank0: bool, resuming: bool = True):
    """Does `node` run on rank 0 (`rank0`) or on another worker, when resuming or not?"""
    verdict = True
    for test, polarity in script.guards(node):
        value = _holds(script, test, rank0, resuming)
        if value is None:
            verdict = None
        elif value != polarity:
            return False
    return verdict


def _holds(script, expr, rank0: bool, resuming: bool, depth: int = 0):
    """Is condition `expr` true on rank 0 (`rank0`) or on another worker, when resuming or not?"""
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, ast.Name):
        value = script.resolve(expr)
        if isinstance(value, (ast.BoolOp, ast.UnaryOp, ast.Compare)):  # a condition in a name
            return _holds(script, value, rank0, resuming, depth + 1)
    if isinstance(expr, ast.BoolOp):
        values = [_holds(script, value, rank0, resuming, depth + 1) for value in expr.values]
        decisive = isinstance(expr.op, ast.Or)  # True decides `or`, False decides `and`
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = _holds(script, expr.operand, rank0, resuming, depth + 1)
        return None if inner is None else not inner
    if (
        isinstance(expr, ast.Call)
        and script.qualified_name(expr.func) in ("int", "bool")
        and len(expr.args) == 1
        and not expr.keywords
    ):
        return _holds(script, expr.args[0], rank0, resuming, depth + 1)
    test = script.rank_test(expr)
    if test is not None:
        return _rank_holds(test, rank0)
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        return _epoch_comparison(script, expr, resuming)
    if _is_epoch(script, expr):
        return resuming  # the epoch is at least 1 when resuming, else 0
    return None


def _rank_holds(test, rank0: bool):
    if test.which != "rank" or not test.exact:
        return None
    if rank0:
        return (test.value == 0) == (test.op == "==")
    if test.value == 0:
        return test.op == "!="
    return None  # `hvd.rank() == 1` holds on one of the other workers only


def _epoch_comparison(script, compare, resuming: bool):
    left, op, right = compare.left, compare.ops[0], compare.comparators[0]
    if not _is_epoch(script, left):
        flipped = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
        left, right, op = right, left, flipped.get(type(op), type(op))()
    bound = script.constant(right)
    if not _is_epoch(script, left) or not isinstance(bound, int) or isinstance(bound, bool):
        return None
    compare_to = {
        ast.Gt: lambda n: n > bound,
        ast.GtE: lambda n: n >= bound,
        ast.Lt: lambda n: n < bound,
        ast.LtE: lambda n: n <= bound,
        ast.Eq: lambda n: n == bound,
        ast.Is: lambda n: n == bound,
        ast.NotEq: lambda n: n != bound,
        ast.IsNot: lambda n: n != bound,
    }.get(type(op))
    if compare_to is None:
        return None
    if not resuming:
        return compare_to(0)
    # When resuming the epoch is some n >= 1: the answer is known if it is the same for all.
    # A comparison with a constant changes its answer only at the bound.
    answers = {compare_to(n) for n in (1, bound - 1, bound, bound + 1) if n >= 1}
    return answers.pop() if len(answers) == 1 else None


def _is_epoch(script, expr) -> bool:
    """True if `expr` is the epoch to resume from, as rank 0 broadcast it."""
    return isinstance(expr, (ast.Name, ast.Call)) and script.mentions_call(expr, *BROADCASTS)
