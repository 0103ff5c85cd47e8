"""Step 3: progress and results are printed by rank 0 only."""

import ast

from grader.reading import training
from grader.reading.rules.fit import NO_FIT
from grader.reading.rules.workers import rank0_guard_failure, rank0_value_failure
from grader.reading.syntax import argument
from grader.reading.verdicts import Failure, Note, first_verdict

STEP = 3
HINT = (
    "Let only rank 0 print: make the verbose setting 1 when hvd.rank() == 0 and 0 on the "
    "other workers, and use it for model.fit and to guard the script's own prints."
)
# Python's logging functions: output on stderr, on every worker that calls them.
LOGGING = tuple(
    f"logging.{level}"
    for level in ("debug", "info", "warning", "error", "critical", "exception", "log")
)
PRINTING_METHODS = ("evaluate", "predict")  # Keras shows a progress bar unless verbose=0


def check(script):
    fit = training.of(script).fit_call()
    if fit is None:
        return Failure(NO_FIT)
    verbose = script.argument(fit, "verbose", 4)
    if verbose is None and script.unpacks_unknown(fit):
        return Note(
            f"line {fit.lineno}: model.fit(...) gets arguments the grader can't read "
            "(**...): it can't tell whether verbose=... is among them",
            fit.lineno,
        )
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
    # In the script's functions (main()...): the progress bars and the Throughput callback,
    # whose verbosity does not depend on where they are written.
    for call in script.calls:
        method = script.qualified_name(call.func).rsplit(".", 1)[-1]
        if (
            script.in_function(call)
            and call is not fit
            and method in PRINTING_METHODS + ("Throughput",)
            and script.call_sites(call)  # a module-level function the script calls by name
        ):
            checks.append(lambda call=call: _printing_failure(script, call))
    return first_verdict(*checks)


def _printing_failure(script, call):
    name = script.qualified_name(call.func)
    method = name.rsplit(".", 1)[-1]
    if name == "print":
        return rank0_guard_failure(script, script.guards(call), call.lineno, "this print(...)")
    if name in LOGGING:  # prints on stderr when logging's level lets it through: the run shows
        failure = rank0_guard_failure(
            script, script.guards(call), call.lineno, f"this {script.source(call.func)}(...)"
        )
        if isinstance(failure, Failure):
            return Note(f"{failure.message}, if logging's level lets it through", call.lineno)
        return failure
    if method not in PRINTING_METHODS + ("Throughput",):
        return None
    given = argument(call, "verbose", 1 if method == "Throughput" else None)
    if given is None:
        if method == "Throughput":
            return _default_verbosity_failure(script, call)
        return Failure(
            f"line {call.lineno}: {script.source(call.func)}(...) shows a progress bar on every "
            "worker: pass verbose=0",
            call.lineno,
        )
    if script.constant(given) in (0, False):
        return None
    what = f"{script.source(call.func)}(verbose=...)"
    return rank0_value_failure(script, given, what, call.lineno)


def _default_verbosity_failure(script, call):
    """The script's own Throughput without verbose=...: its default decides who prints."""
    reaching = script.bindings_before(call.func) if isinstance(call.func, ast.Name) else []
    if len(reaching) != 1 or not isinstance(reaching[0].statement, ast.ClassDef):
        return None  # not the workbook's class: nothing known of what it prints
    for statement in reaching[0].statement.body:
        if isinstance(statement, ast.FunctionDef) and statement.name == "__init__":
            arguments = statement.args
            positional = arguments.posonlyargs + arguments.args
            defaults = dict(
                zip(
                    [a.arg for a in positional[len(positional) - len(arguments.defaults) :]],
                    arguments.defaults,
                )
            )
            default = defaults.get("verbose")
            if default is not None and script.constant(default):
                return Failure(
                    f"line {call.lineno}: Throughput(...) gets no verbose, so it takes its "
                    f"default, {script.source(default)}, and every worker prints its throughput: "
                    "pass verbose=verbose",
                    call.lineno,
                )
    return None
