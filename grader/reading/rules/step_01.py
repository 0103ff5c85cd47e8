"""Step 1: import Horovod's Keras API and call hvd.init() before anything else uses Horovod."""

from grader.reading.rules import uncalled
from grader.reading.syntax import HVD, position
from grader.reading.verdicts import Failure, Note

STEP = 1
HINT = (
    "Import Horovod's Keras API (horovod.tensorflow.keras, usually as hvd) with the other "
    "imports, and call hvd.init() once, right after the arguments are parsed and before "
    "anything else uses hvd."
)

# Horovod's functions made to be called before hvd.init(): what it was built with, and whether
# it is initialized yet (the check made for calling init once).
WITHOUT_INIT = {
    "is_initialized",
    "mpi_built",
    "gloo_built",
    "nccl_built",
    "ddl_built",
    "ccl_built",
    "cuda_built",
    "rocm_built",
}


def check(script):
    modules = script.imported_modules()
    if not any(module == HVD or module.startswith(HVD + ".") for module in modules):
        return _wrong_import(modules)
    reached = script.calls_reached(f"{HVD}.init")
    inits = [(call, chain) for call, chain in reached if chain is not None]
    if not inits:
        named = [node for node in uncalled.functions(script) if _is_init(script, node)]
        if named:
            return uncalled.failure(script, named[0])  # `hvd.init` without parentheses
        if reached:  # in a function the grader can't tell when it runs
            call = reached[0][0]
            return Note(
                f"line {call.lineno}: hvd.init() is called in a function, and the grader can't "
                "tell when that runs (it follows functions the script calls by name); it "
                "looked for hvd.init() before anything else uses Horovod",
                call.lineno,
            )
        return Failure(
            "hvd.init() is never called (at the top level, or in a function the script calls)"
        )
    init, chain = inits[0]
    first_init = chain[0] if chain else init  # where it runs: the call of the set-up function
    for call in script.calls:
        name = script.qualified_name(call.func)
        if not name.startswith(HVD + ".") or call is init or script.in_function(call):
            continue
        if name.rsplit(".", 1)[-1] in WITHOUT_INIT:
            continue
        if position(call) < position(first_init):
            where = f"line {first_init.lineno}" + (
                f", in {script.source(first_init.func)}()" if chain else ""
            )
            return Failure(
                f"line {call.lineno}: `{script.source(call)}` uses Horovod before hvd.init() "
                f"({where}): call hvd.init() first",
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
