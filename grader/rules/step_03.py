"""Step 3: progress and results are printed by rank 0 only."""

from grader import training
from grader.rules.fit import NO_FIT
from grader.rules.workers import rank0_guard_failure, rank0_value_failure
from grader.syntax import argument
from grader.verdicts import Failure, first_verdict

STEP = 3
HINT = (
    "Let only rank 0 print: make the verbose setting 1 when hvd.rank() == 0 and 0 on the "
    "other workers, and use it for model.fit and to guard the script's own prints."
)
PRINTING_METHODS = ("evaluate", "predict")  # Keras shows a progress bar unless verbose=0


def check(script):
    fit = training.of(script).fit_call()
    if fit is None:
        return Failure(NO_FIT)
    verbose = argument(fit, "verbose", 4)
    if verbose is None:
        return Failure(
            f"line {fit.lineno}: model.fit(...) has no verbose=..., so Keras shows a progress "
            "bar on every worker: pass verbose=verbose",
            fit.lineno,
        )
    checks = [lambda: rank0_value_failure(script, verbose, "model.fit(verbose=...)", fit.lineno)]
    for call in script.calls:
        if not script.in_function(call) and call is not fit:
            checks.append(lambda call=call: _printing_failure(script, call))
    return first_verdict(*checks)


def _printing_failure(script, call):
    name = script.qualified_name(call.func)
    method = name.rsplit(".", 1)[-1]
    if name == "print":
        return rank0_guard_failure(script, script.guards(call), call.lineno, "this print(...)")
    if method not in PRINTING_METHODS + ("Throughput",):
        return None
    given = argument(call, "verbose")
    if given is None:
        if method == "Throughput":
            return None
        return Failure(
            f"line {call.lineno}: {script.source(call.func)}(...) shows a progress bar on every "
            "worker: pass verbose=0",
            call.lineno,
        )
    if script.constant(given) in (0, False):
        return None
    what = f"{script.source(call.func)}(verbose=...)"
    return rank0_value_failure(script, given, what, call.lineno)
