"""Step 1: import Horovod's Keras API and call hvd.init() before anything else uses Horovod."""

from grader.rules import uncalled
from grader.verdicts import Failure
from grader.syntax import HVD, position

STEP = 1
HINT = (
    "Import Horovod's Keras API (horovod.tensorflow.keras, usually as hvd) with the other "
    "imports, and call hvd.init() once, right after the arguments are parsed and before "
    "anything else uses hvd."
)


def check(script):
    modules = script.imported_modules()
    if not any(module == HVD or module.startswith(HVD + ".") for module in modules):
        return _wrong_import(modules)
    inits = [call for call in script.calls_to(f"{HVD}.init") if not script.in_function(call)]
    if not inits:
        named = [node for node in uncalled.functions(script) if _is_init(script, node)]
        if named:
            return uncalled.failure(script, named[0])  # `hvd.init` without parentheses
        return Failure("hvd.init() is never called at the top level of the script")
    first_init = inits[0]
    for call in script.calls:
        name = script.qualified_name(call.func)
        if not name.startswith(HVD + ".") or call is first_init or script.in_function(call):
            continue
        if position(call) < position(first_init):
            return Failure(
                f"line {call.lineno}: `{script.source(call)}` uses Horovod before hvd.init() "
                f"(line {first_init.lineno}): call hvd.init() first",
                call.lineno,
            )
    return None


def _wrong_import(modules):
    if any(module == "horovod.keras" or module.startswith("horovod.keras.") for module in modules):
        return Failure(
            "horovod.keras is Horovod's API for the standalone Keras package; this script uses "
            "tf.keras: import horovod.tensorflow.keras as hvd"
        )
    if any(module.startswith("horovod") for module in modules):
        return Failure(
            "import the Keras API, horovod.tensorflow.keras (it has the callbacks and "
            "load_model the later steps use): import horovod.tensorflow.keras as hvd"
        )
    return Failure("Horovod is not imported: add import horovod.tensorflow.keras as hvd")


def _is_init(script, node):
    return script.qualified_name(node) == f"{HVD}.init"
