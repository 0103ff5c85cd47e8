"""Step 2: each worker sees only the GPU of its local rank (a no-op without GPUs)."""

import ast

from grader.reading import ranks
from grader.reading.rules import uncalled
from grader.reading.syntax import TF, argument, position
from grader.reading.verdicts import Failure, Note

STEP = 2
HINT = (
    'After hvd.init(), list the GPUs with tf.config.list_physical_devices("GPU") and, if '
    "there are any, make only the one at index hvd.local_rank() visible with "
    'tf.config.set_visible_devices(..., "GPU").'
)
SET_VISIBLE = (f"{TF}.config.set_visible_devices", f"{TF}.config.experimental.set_visible_devices")


def check(script):
    reached = script.calls_reached(*SET_VISIBLE)
    calls = [(call, chain) for call, chain in reached if chain is not None]
    if not calls and reached:
        call = reached[0][0]
        return Note(
            f"line {call.lineno}: tf.config.set_visible_devices(...) is in a function the grader "
            "can't tell when it runs (it follows functions the script calls by name); it looked "
            "for gpus[hvd.local_rank()] made visible right after hvd.init()",
            call.lineno,
        )
    if not calls:
        if "CUDA_VISIBLE_DEVICES" in script.text:
            return Failure(
                "CUDA_VISIBLE_DEVICES is read when TensorFlow first looks for GPUs, which "
                "parse_args() has already done: pin the GPU with tf.config.set_visible_devices"
            )
        return Failure("no tf.config.set_visible_devices(...) call: every worker sees every GPU")
    call, chain = calls[0]
    line = call.lineno
    if script.constant(argument(call, "device_type", 1)) != "GPU":
        return Failure(
            f'line {line}: pass the device type "GPU"; without it set_visible_devices applies '
            "to every device type and hides the CPU",
            line,
        )
    devices = argument(call, "devices", 0)
    failure = _index_failure(script, devices, line, chain)
    if failure:
        return failure
    started = _first_tensorflow_use(script)
    runs_at = chain[0] if chain else call  # a call in a function runs where the function is called
    if started is not None and position(started) < position(runs_at):
        return Failure(
            f"line {line}: TensorFlow is already running (line {started.lineno} uses it) when the "
            "GPU is pinned; pin it right after hvd.init()",
            line,
        )
    return _guard_failure(script, call, devices, chain)


def _guard_failure(script, call, devices, chain):
    """The pinning must be guarded by a test of the GPU list (or a try), not of anything else."""
    line = call.lineno
    guards = script.guards_through(call, chain)
    for test, _ in guards:
        # `hvd.rank() == 0`, `gpus and hvd.rank() == 0`
        if ranks.of(script).rank_test(test) is not None:
            return Failure(
                f"line {line}: the GPU is pinned only when `{script.source(test)}`, a test of the "
                "worker's rank, not of the GPU list: the other workers are never pinned and all "
                "use GPU 0; what the guard is for is a machine without GPUs, where the list is "
                "empty and indexing it raises IndexError: pin `if gpus:`",
                line,
            )
    if any(isinstance(a, ast.Try) for node in [call, *chain] for a in script.ancestors(node)):
        return None
    if not guards:
        return Failure(
            f"line {line}: on a machine without GPUs the GPU list is empty and indexing it "
            "raises IndexError: pin only `if gpus:`",
            line,
        )
    listed = _listed(script, devices)
    if any(script.mentions(test, listed) for test, _ in guards):
        return None
    shown = script.source(guards[0][0])
    return Note(
        f"line {line}: it can't tell whether `{shown}` makes sure there is a GPU to pin; it "
        "looked for a test of the GPU list, `if gpus:`",
        line,
    )


def _listed(script, devices):
    """A predicate: is this node the GPU list that `devices` indexes (or a call listing GPUs)?"""
    device = script.resolve(devices) if devices is not None else None
    if isinstance(device, (ast.List, ast.Tuple)) and len(device.elts) == 1:
        device = script.resolve(device.elts[0])
    name = (
        device.value.id
        if isinstance(device, ast.Subscript) and isinstance(device.value, ast.Name)
        else None
    )

    def is_the_list(node):
        if isinstance(node, ast.Name) and node.id == name:
            return True
        return isinstance(node, ast.Call) and script.qualified_name(node.func).endswith(
            "list_physical_devices"
        )

    return is_the_list


def _index_failure(script, devices, line, chain=()):
    device = script.resolve(devices) if devices is not None else None
    if isinstance(device, (ast.List, ast.Tuple)) and len(device.elts) == 1:
        device = script.resolve(device.elts[0])
    if isinstance(device, ast.Name) and script.bindings_before(device):
        return Note(  # `for index, gpu in enumerate(gpus): if index == hvd.local_rank(): ...`
            f"line {line}: it can't tell which GPU `{device.id}` is; it looked for "
            "gpus[hvd.local_rank()]",
            line,
        )
    if not isinstance(device, ast.Subscript):
        return Failure(
            f"line {line}: make only one GPU visible, the one of this worker's local rank: "
            "gpus[hvd.local_rank()]",
            line,
        )
    index = device.slice
    parameter = _parameter(script, index)
    if parameter is not None:  # def use_one_gpu(index): ... devices[index]
        given = script.argument_for(index, chain[-1]) if chain else None
        if given is None:
            return Note(
                f"line {line}: the GPU list is indexed by `{index.id}`, a parameter of "
                f"`{parameter.name}`, and the grader can't tell what it is given; it looked "
                "for gpus[hvd.local_rank()]",
                line,
            )
        index = given  # what the call that reaches here passes
    kind = ranks.of(script).rank_kind(index)
    if kind == "local_rank":
        return None
    failure = uncalled.failure(script, index)
    if failure:
        return failure
    if kind == "rank":
        return Failure(
            f"line {line}: hvd.rank() counts workers on all machines, so on a second machine it "
            "points past its GPUs: index by hvd.local_rank()",
            line,
        )
    value = script.constant(index)
    if value is not None:
        return Failure(
            f"line {line}: every worker on a machine would use GPU {value}: index by "
            "hvd.local_rank()",
            line,
        )
    return Failure(f"line {line}: index the GPU list by hvd.local_rank()", line)


def _parameter(script, name):
    """The function whose parameter `name` is, where it is read; None if it is not one."""
    if not isinstance(name, ast.Name):
        return None
    reaching = script.bindings_before(name)
    if len(reaching) == 1 and isinstance(
        reaching[0].statement, (ast.FunctionDef, ast.AsyncFunctionDef)
    ):
        return reaching[0].statement
    return None


def _first_tensorflow_use(script):
    """The first top-level call that makes TensorFlow create devices (not tf.config.*)."""
    for call in script.calls:
        name = script.qualified_name(call.func)
        if name.startswith(TF + ".") and not name.startswith(TF + ".config."):
            if not script.in_function(call):
                return call
    return None
