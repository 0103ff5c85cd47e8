"""Step 2: each worker sees only the GPU of its local rank (a no-op without GPUs)."""

import ast

from grader.engine import Failure
from grader.syntax import TF, argument, position

STEP = 2
HINT = (
    'After hvd.init(), list the GPUs with tf.config.list_physical_devices("GPU") and, if '
    "there are any, make only the one at index hvd.local_rank() visible with "
    'tf.config.set_visible_devices(..., "GPU").'
)
SET_VISIBLE = (f"{TF}.config.set_visible_devices", f"{TF}.config.experimental.set_visible_devices")


def check(script):
    calls = [call for call in script.calls_to(*SET_VISIBLE) if not script.in_function(call)]
    if not calls:
        if "CUDA_VISIBLE_DEVICES" in script.text:
            return Failure(
                "CUDA_VISIBLE_DEVICES is read when TensorFlow first looks for GPUs, which "
                "parse_args() has already done: pin the GPU with tf.config.set_visible_devices"
            )
        return Failure("no tf.config.set_visible_devices(...) call: every worker sees every GPU")
    call = calls[0]
    line = call.lineno
    if script.constant(argument(call, "device_type", 1)) != "GPU":
        return Failure(
            f'line {line}: pass the device type "GPU"; without it set_visible_devices applies '
            "to every device type and hides the CPU",
            line,
        )
    failure = _index_failure(script, argument(call, "devices", 0), line)
    if failure:
        return failure
    if not script.guards(call) and not any(isinstance(a, ast.Try) for a in script.ancestors(call)):
        return Failure(
            f"line {line}: on a machine without GPUs the GPU list is empty and indexing it "
            "raises IndexError: pin only `if gpus:`",
            line,
        )
    started = _first_tensorflow_use(script)
    if started is not None and position(started) < position(call):
        return Failure(
            f"line {line}: TensorFlow is already running (line {started.lineno} uses it) when the "
            "GPU is pinned; pin it right after hvd.init()",
            line,
        )
    return None


def _index_failure(script, devices, line):
    device = script.resolve(devices) if devices is not None else None
    if isinstance(device, (ast.List, ast.Tuple)) and len(device.elts) == 1:
        device = script.resolve(device.elts[0])
    if not isinstance(device, ast.Subscript):
        return Failure(
            f"line {line}: make only one GPU visible, the one of this worker's local rank: "
            "gpus[hvd.local_rank()]",
            line,
        )
    index = device.slice
    kind = script.rank_kind(index)
    if kind == "local_rank":
        return None
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


def _first_tensorflow_use(script):
    """The first top-level call that makes TensorFlow create devices (not tf.config.*)."""
    for call in script.calls:
        name = script.qualified_name(call.func)
        if name.startswith(TF + ".") and not name.startswith(TF + ".config."):
            if not script.in_function(call):
                return call
    return None
