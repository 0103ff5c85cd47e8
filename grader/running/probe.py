"""One worker of the run-for-real check: records what the learner's script does on this rank.

    horovodrun -np 2 python grader/running/probe.py SCRIPT [ARGS...]    (grader/running/run_check.py does it)

The script runs unchanged (runpy, as `__main__`) after a few hooks are installed:

- Model.fit gets a callback at the start of the callback list and one at its end. The first
  sees the weights right after the first training step's update, before any other callback
  (Horovod's broadcast runs at the end of that step); the last sees them once every callback
  has run, the learning rate of each batch and the metrics of each epoch
  (grader/running/probe_callbacks.py, loaded beside this file by its path).
- The training and validation datasets get a tap that names every image of every batch by
  its median pixel: the check gives the script keyed data (grader/running/keyed_data.py), each
  image one grey level of its own, which survives the lesson's flips, shifts and normalization,
  so the images each rank trains and validates on in an epoch show (NumPy arrays given to
  model.fit are named whole).
- Horovod's collectives, called from the script, note the line they wait on; Model.save and
  save_weights note the files they write.
- The script's argparse keeps only the options it knows (the check passes the lesson's options,
  --warmup-epochs and --lr-drops among them, to every script) and notes what it parsed; what each
  rank prints is counted; the first allreduce of the gradients keeps what went in (this rank's
  gradients) and what came out (the reduced ones); each batch notes the learning rate and the
  momentum every callback left.
- GPUs are simulated: tf.config lists one per worker of this host (CUDA_VISIBLE_DEVICES
  respected), and set_visible_devices or set_memory_growth on them only note what was asked, so
  a run on CPUs shows which GPU each rank would use.

What rank N saw in run M of the script goes to $WORKBOOK_PROBE_DIR/runM-rankN.json, rewritten
at every stage, so that a run stopped early still tells how far each rank got; the weights
before and after the first step go to .npy files beside it. Only the standard library, NumPy,
TensorFlow and Horovod: this runs in the worker, which must not import the grader.
"""

import builtins
import inspect
import io
import json
import os
import runpy
import socket
import sys
import time
import traceback

PROBE_DIR_VARIABLE = "WORKBOOK_PROBE_DIR"
# "all": each rank but 0 gets a --log-dir of its own (empty), as if rank 0's disk were on
# another machine.
PRIVATE_LOG_DIR_VARIABLE = "WORKBOOK_PROBE_PRIVATE_LOG_DIR"
# Which run of the script this launch is: "1", or "2" for the one that goes on from the
# first run's checkpoint (a new launch, new processes: as a real resume).
RUN_NUMBER_VARIABLE = "WORKBOOK_PROBE_RUN"
SIMULATED_GPUS_VARIABLE = "WORKBOOK_PROBE_GPUS"  # how many GPUs to simulate on this host
PRINTED_KEPT = 200  # characters of the first output kept
COLLECTIVES = (
    "allreduce",
    "grouped_allreduce",
    "allgather",
    "broadcast",
    "alltoall",
    "reducescatter",
    "broadcast_object",
    "allgather_object",
    "broadcast_variables",
    "join",
    "barrier",
)

RANK = int(os.environ.get("HOROVOD_RANK", "0"))
STARTED = time.monotonic()


class Record:
    """What this rank did in one run of the script; save() rewrites its file atomically."""

    def __init__(self, folder: str, script: str, run: int, rank: int = RANK):
        self.folder = folder
        self.prefix = os.path.join(folder, f"run{run}-rank{rank}")
        self.path = f"{self.prefix}.json"
        self.data = {
            "run": run,
            "rank": rank,
            "size": int(os.environ.get("HOROVOD_SIZE", "1")),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "script": script,
            "stages": [],
            "waiting": None,
            "fit": None,
            "train_keys": [],  # [[the key of each image] of each training batch], in order
            "val_keys": [],  # ... of each validation batch
            "array_keys": None,  # the keys of a NumPy x given to model.fit, whole
            "val_steps": {},  # {epoch: validation steps done}
            "lr": {},
            "epoch_logs": {},
            "saved": [],
            "args": None,  # what the script's argparse parsed, and the options it did not know
            "printed": {"chars": 0, "first": ""},  # what this rank wrote: stdout, its stderr
            "steps": {},  # {epoch: training steps done}
            "momentum": {},  # {epoch: [the optimizer's momentum at each step]}, SGD only
            "seen_logs": [],  # the logs each of the script's callbacks got at epoch 1's end
            "own_logs": {},  # the metrics of its own batches at epoch 1's end, before averaging
            "horovod": None,  # at model.fit: {"initialized", "size", "rank", "local_rank"}
            "gpus": None,  # at model.fit: {"listed", "visible"}: the simulated GPUs
            "gradients": False,  # whether the first allreduce of the gradients was kept
            "wrapped": [],  # the class of each optimizer hvd.DistributedOptimizer wrapped
            "error": None,
            "finished": False,
            # What ran that is not the script's own code (another file run, imported or exec'd,
            # a Python started, model.fit called from elsewhere): its evidence is not the script's.
            "foreign": [],
        }

    def stage(self, what: str) -> None:
        self.data["stages"].append([round(time.monotonic() - STARTED, 2), what])
        self.save()

    def save(self) -> None:
        if os.getpid() != self.data["pid"]:
            return  # a process the script forked: it is not this rank's worker
        temporary = f"{self.path}.tmp"
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(self.data, file)
        os.replace(temporary, self.path)

    def save_vector(self, name: str, vector) -> None:
        import numpy as np

        np.save(f"{self.prefix}-{name}.npy", vector)


def script_lines(script: str, frame) -> dict:
    """Where in the learner's script `frame` is: {"line", "code"} of the innermost line there,
    and "top_line", the script's own top-level statement (the order of the script's lines)."""
    inside = [s for s in traceback.extract_stack(frame) if os.path.abspath(s.filename) == script]
    if not inside:
        return {"line": None, "code": "", "top_line": None}
    return {
        "line": inside[-1].lineno,
        "code": (inside[-1].line or "").strip(),
        "top_line": inside[0].lineno,
    }


def error_line(message: str) -> str:
    """The line of an error's message that says what went wrong: its last, but not a graph
    op's name (`[[{{node ...}}]]`, under the op's own words)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith("[[")]
    return (said or lines or [""])[-1]


def traceback_line(script: str, error: BaseException):
    """(line number, text) of the script's line where `error` went by, or (None, "")."""
    for summary in reversed(traceback.extract_tb(error.__traceback__)):
        if os.path.abspath(summary.filename) == script:
            return summary.lineno, (summary.line or "").strip()
    return None, ""


BUILT_AT = "_workbook_probe_built"  # a callback's attribute: the script's line that built it


def failing_object(script: str, error: BaseException):
    """The callback or optimizer that the library code under the script's innermost frame was
    working on when `error` went by (a frame's `self`; a callback also as a local, as
    CallbackList's `callback`), innermost first: {"kind", "class", "line", "code"} (the line
    that built it, when known), or None."""
    import re

    import tensorflow as tf

    # An op of the training graph failed ({{node ...}}): the error surfaces wherever the graph's
    # results were next read (often a callback), and an allreduce fails as well when another
    # rank died: no object here is known to be the cause.
    if re.search(r"\{\{node [^}]+\}\}", str(error)):
        return None
    frames, here = [], error.__traceback__
    while here is not None:
        frames.append(here.tb_frame)
        here = here.tb_next
    inside = [
        i for i, frame in enumerate(frames) if os.path.abspath(frame.f_code.co_filename) == script
    ]
    if not inside:
        return None
    callback = tf.keras.callbacks.Callback
    for frame in reversed(frames[inside[-1] + 1 :]):
        values = frame.f_locals
        own = values.get("self")
        for value in (own, *values.values()):
            if isinstance(value, type) and issubclass(value, callback):
                return {"kind": "callback class", "class": value.__name__, "line": None, "code": ""}
            if isinstance(value, callback):
                built = getattr(value, BUILT_AT, None) or {"line": None, "code": ""}
                return {
                    "kind": "callback",
                    "class": type(value).__name__,
                    "line": built["line"],
                    "code": built["code"],
                }
            if value is own and hasattr(value, "apply_gradients") and hasattr(value, "get_config"):
                if "horovod" in frame.f_code.co_filename:  # in Horovod's wrapper: its allreduce
                    return {
                        "kind": "optimizer wrapper",
                        "class": "DistributedOptimizer",
                        "line": None,
                        "code": "",
                    }
                return {
                    "kind": "optimizer",
                    "class": type(value).__name__,
                    "line": None,
                    "code": "",
                }
    return None


def private_log_dir(argv: list, run: int, rank: int = RANK) -> list:
    """argv with `--log-dir X` made `X-rankN-runM` on ranks other than 0."""
    if rank == 0:
        return argv
    changed = list(argv)
    for index, token in enumerate(changed):
        if token == "--log-dir" and index + 1 < len(changed):
            changed[index + 1] = f"{changed[index + 1]}-rank{rank}-run{run}"
        elif token.startswith("--log-dir="):
            changed[index] = f"{token}-rank{rank}-run{run}"
    return changed


def image_keys(images) -> list:
    """Each image's median pixel: its key in the check's keyed data, whatever flip, shift of a
    few pixels or per-pixel affine normalization the script applied (padding stays a minority)."""
    import numpy as np

    images = np.asarray(images)
    if images.ndim < 2 or not images.shape[0]:
        return []
    return [float(v) for v in np.median(images.reshape(images.shape[0], -1), axis=1)]


def horovod_state() -> dict:
    """Whether Horovod is initialized in this process, and what it says this rank is."""
    try:
        import horovod.tensorflow.keras as hvd

        if not hvd.is_initialized():
            return {"initialized": False}
        return {
            "initialized": True,
            "size": hvd.size(),
            "rank": hvd.rank(),
            "local_rank": hvd.local_rank(),
        }
    except Exception as error:  # Horovod not importable: the check says so
        return {"initialized": False, "error": f"{type(error).__name__}: {error}"}


def jsonable(value):
    """`value` as JSON can hold it: lists for tuples, text for anything else unusual."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    return str(value)


def known_options(parser, tokens: list) -> tuple:
    """(tokens the parser knows, options it doesn't): an option it lacks goes, with its values."""
    kept, ignored, dropping = [], [], False
    for token in tokens:
        if token.startswith("--"):
            name = token.split("=", 1)[0]
            dropping = name not in parser._option_string_actions
            if dropping:
                ignored.append(name)
                continue
        elif dropping:
            continue
        kept.append(token)
    return kept, ignored


class CountedOutput:
    """This rank's stdout (or stderr) as it was, counting what the script prints into the
    record. With `script` (stderr): only what the script itself writes, with print or through
    Python's logging, not the libraries' warnings."""

    def __init__(self, stream, script: str | None = None):
        self._stream = stream
        self._script = script

    def write(self, text):
        record = Current.record
        shown = text.strip() if isinstance(text, str) else ""
        if record is not None and shown and (self._script is None or from_script(self._script)):
            printed = record.data["printed"]
            printed["chars"] += len(shown)
            room = PRINTED_KEPT - len(printed["first"])
            if room > 0:
                printed["first"] += text[:room]
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def from_script(script: str) -> bool:
    """Whether the script's own line is what writes (print, or logging called from it)."""
    try:
        frame = sys._getframe(2)
    except ValueError:  # written from C with no Python caller (the interpreter's traceback)
        return False
    while frame is not None and os.sep + "logging" + os.sep in frame.f_code.co_filename:
        frame = frame.f_back
    return frame is not None and os.path.abspath(frame.f_code.co_filename) == script


def install_argparse_hook() -> None:
    """parse_args() of the command line keeps the options the script knows and notes the rest."""
    import argparse

    original = argparse.ArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        if args is not None:
            return original(self, args, namespace)
        kept, ignored = known_options(self, sys.argv[1:])
        parsed = original(self, kept, namespace)
        Current.record.data["args"] = {"values": jsonable(vars(parsed)), "ignored": ignored}
        Current.record.save()
        return parsed

    argparse.ArgumentParser.parse_args = parse_args


class SimulatedGpus:
    """`count` GPUs for tf.config's device functions; what the script asks of them is noted."""

    def __init__(self, count: int):
        self.count = count
        self.physical = {}  # device name -> the physical GPU behind it
        self.visible = None  # physical GPUs made visible, None until the script sets them

    def listed(self) -> list:
        import tensorflow as tf

        numbers = list(range(self.count))
        chosen = os.environ.get("CUDA_VISIBLE_DEVICES")
        if chosen is not None:  # CUDA renumbers the GPUs it shows from 0
            numbers = [int(n) for n in chosen.split(",") if n.strip().isdigit()]
            numbers = [n for n in numbers if n < self.count]
        devices = []
        for index, number in enumerate(numbers):
            device = tf.config.PhysicalDevice(f"/physical_device:GPU:{index}", "GPU")
            self.physical[device.name] = number
            devices.append(device)
        return devices

    def is_simulated(self, device) -> bool:
        return getattr(device, "device_type", None) == "GPU" and device.name in self.physical

    def state(self) -> dict:
        listed = [self.physical[d.name] for d in self.listed()]
        visible = listed if self.visible is None else self.visible
        return {
            "count": self.count,
            "listed": listed,
            "visible": visible,
            "set": self.visible is not None,
        }

    def install(self) -> None:
        import tensorflow as tf

        config, experimental = tf.config, tf.config.experimental
        original_list = config.list_physical_devices
        original_set = config.set_visible_devices
        original_get = config.get_visible_devices

        def list_physical_devices(device_type=None):
            if device_type == "GPU":
                return self.listed()
            found = original_list(device_type)
            return found + self.listed() if device_type is None else found

        def set_visible_devices(devices, device_type=None):
            # One device is a PhysicalDevice, a namedtuple: not a list of devices.
            many = [devices] if hasattr(devices, "device_type") else list(devices)
            if device_type == "GPU" or any(self.is_simulated(d) for d in many):
                self.visible = [self.physical[d.name] for d in many if self.is_simulated(d)]
                return None
            return original_set(devices, device_type)

        def get_visible_devices(device_type=None):
            if device_type == "GPU":
                return [
                    d
                    for d in self.listed()
                    if self.visible is None or self.physical[d.name] in self.visible
                ]
            return original_get(device_type)

        def passed_over(original):
            def call(device, *args, **kwargs):
                return None if self.is_simulated(device) else original(device, *args, **kwargs)

            return call

        for module in (config, experimental):
            module.list_physical_devices = list_physical_devices
            module.set_visible_devices = set_visible_devices
            module.get_visible_devices = get_visible_devices
        experimental.set_memory_growth = passed_over(experimental.set_memory_growth)
        for name in ("set_logical_device_configuration", "set_virtual_device_configuration"):
            for module in (config, experimental):
                if hasattr(module, name):
                    setattr(module, name, passed_over(getattr(module, name)))


def watch_epoch_logs(callback, record, epoch: int) -> None:
    """The callback notes the logs it gets at the end of `epoch` (copied then: a callback after
    it may still change them, as MetricAverageCallback does)."""
    import tensorflow as tf

    original = callback.on_epoch_end
    name = type(callback).__name__
    keras = tf.keras.callbacks
    # Keras's callbacks that record or act on the metrics (what they saw is what they wrote);
    # the script's own (an averaging callback, a LambdaCallback, a throughput meter) are not.
    reads = isinstance(
        callback,
        (
            keras.ModelCheckpoint,
            keras.TensorBoard,
            keras.CSVLogger,
            keras.EarlyStopping,
            keras.ReduceLROnPlateau,
            keras.RemoteMonitor,
            keras.ProgbarLogger,
        ),
    )

    def on_epoch_end(at, logs=None):
        if at == epoch and logs:
            numbers = {
                key: float(value)
                for key, value in logs.items()
                if isinstance(value, (int, float)) or hasattr(value, "__float__")
            }
            record.data["seen_logs"].append({"callback": name, "logs": numbers, "reads": reads})
        return original(at, logs)

    callback.on_epoch_end = on_epoch_end


def keep_first_allreduce(optimizer, record) -> None:
    """The optimizer's first allreduce of the gradients keeps this rank's gradients (what went
    in) and the reduced ones (what came out), as .npy files beside the record."""
    import numpy as np
    import tensorflow as tf

    original = optimizer._allreduce
    kept = []

    def keep(local, reduced):
        if not kept:
            kept.append(True)
            record.save_vector("local-gradient", local)
            record.save_vector("reduced-gradient", reduced)
            record.data["gradients"] = True
            record.save()
        return np.array(True)

    def flat(tensors):
        return tf.concat([tf.reshape(tf.cast(t, tf.float64), [-1]) for t in tensors], 0)

    def allreduce(grads, variables):
        reduced = original(grads, variables)
        pairs = [
            (g, r)
            for g, r in zip(grads, reduced)
            if isinstance(g, tf.Tensor) and isinstance(r, tf.Tensor)
        ]
        if not pairs:
            return reduced
        done = tf.numpy_function(
            keep, [flat([g for g, _ in pairs]), flat([r for _, r in pairs])], Tout=tf.bool
        )
        with tf.control_dependencies([done]):
            return [tf.identity(r) if isinstance(r, tf.Tensor) else r for r in reduced]

    optimizer._allreduce = allreduce


class Current:
    """The record of the run going on: the hooks write to it, main() replaces it per run."""

    record: Record = None


def load_sibling(name: str):
    """A module of the probe's own folder, loaded by its file path: the worker runs the probe as
    a file, without the grader's package (grader/running/sandbox.py shows it these files only)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"workbook_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tapped(dataset, kept: list):
    """The dataset, with a tap that appends the keys of each batch's images to `kept`."""
    import tensorflow as tf

    def keep(images):
        kept.append(image_keys(images.numpy()))
        return True

    def tap(*element):
        if not element or not isinstance(element[0], tf.Tensor):
            return element  # a dict of inputs, say: no keys
        done = tf.py_function(keep, [element[0]], Tout=tf.bool)
        with tf.control_dependencies([done]):
            return (tf.identity(element[0]), *element[1:])

    return dataset.map(tap)


def fit_call(arguments: dict, optimizer, callbacks: list, script: str, caller) -> dict:
    """What the record keeps of the script's model.fit(...): its arguments, the optimizer, and
    the script's line that called it (`caller` is the frame)."""
    import tensorflow as tf

    return {
        "initial_epoch": int(arguments.get("initial_epoch") or 0),
        "epochs": int(arguments.get("epochs") or 1),
        "steps_per_epoch": arguments.get("steps_per_epoch"),
        "callbacks": [type(callback).__name__ for callback in callbacks],
        "optimizer": type(optimizer).__name__ if optimizer is not None else None,
        # hvd.DistributedOptimizer's class has the name of the one it wraps; this is its mark.
        "distributed_optimizer": hasattr(optimizer, "_allreduce_grads"),
        "dataset": isinstance(arguments.get("x"), tf.data.Dataset),
        "verbose": jsonable(arguments.get("verbose")),
        **script_lines(script, caller),
    }


def watch_training(arguments: dict, optimizer, callbacks: list, record: Record) -> None:
    """Puts the watches on what model.fit was given: the optimizer's first allreduce, the logs
    the script's callbacks get, and a tap on the images of the datasets (or the keys of an array)."""
    import tensorflow as tf

    if hasattr(optimizer, "_allreduce_grads") and hasattr(optimizer, "_allreduce"):
        keep_first_allreduce(optimizer, record)
    for callback in callbacks:  # the script's own, which may read the metrics
        if not type(callback).__module__.startswith("horovod"):
            watch_epoch_logs(callback, record, record.data["fit"]["initial_epoch"])
    x, validation = arguments.get("x"), arguments.get("validation_data")
    if isinstance(x, tf.data.Dataset):
        arguments["x"] = tapped(x, record.data["train_keys"])
    elif hasattr(x, "shape") and hasattr(x, "dtype") and not arguments.get("steps_per_epoch"):
        record.data["array_keys"] = image_keys(x)  # every row, every epoch
    if isinstance(validation, tf.data.Dataset):
        arguments["validation_data"] = tapped(validation, record.data["val_keys"])
    record.data["lr_callbacks"] = {
        type(callback).__name__: float(callback.initial_lr)
        for callback in callbacks
        if isinstance(getattr(callback, "initial_lr", None), (int, float))
    }


def install_fit_hook(script: str, gpus: SimulatedGpus | None) -> None:
    """The script's first model.fit is recorded and watched, between the probe's two callbacks
    (grader/running/probe_callbacks.py); a second one trains as asked and records nothing."""
    import tensorflow as tf

    probes = load_sibling("probe_callbacks")
    original_fit = tf.keras.Model.fit
    fit_signature = inspect.signature(original_fit)

    def fit(self, *args, **kwargs):
        record = Current.record
        if record.data["fit"] is not None:  # a second fit: train as asked, record nothing
            return original_fit(self, *args, **kwargs)
        bound = fit_signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = bound.arguments
        optimizer = getattr(self, "optimizer", None)
        callbacks = list(arguments.get("callbacks") or [])
        caller = sys._getframe(1)
        record.data["fit"] = fit_call(arguments, optimizer, callbacks, script, caller)
        if record.data["fit"]["line"] is None:
            note_foreign(
                record, f"model.fit was called from {caller_file(caller)}, not from the script"
            )
        record.data["horovod"] = horovod_state()
        if gpus is not None:
            record.data["gpus"] = gpus.state()
        watch_training(arguments, optimizer, callbacks, record)
        arguments["callbacks"] = [probes.FirstProbe(record), *callbacks, probes.LastProbe(record)]
        for what in foreign_modules(script):
            note_foreign(record, what)
        record.stage("started model.fit")
        result = original_fit(*bound.args, **bound.kwargs)
        record.stage("model.fit returned")
        return result

    tf.keras.Model.fit = fit


def install_callback_hook(script: str) -> None:
    """Each callback built by the script's own line notes that line (failing_object names it)."""
    import tensorflow as tf

    # Keras cuts its own frames out of a traceback; failing_object needs them.
    tf.debugging.disable_traceback_filtering()
    original_callback_init = tf.keras.callbacks.Callback.__init__

    def callback_init(self, *args, **kwargs):
        """Callback.__init__, noting the script's line that built this callback."""
        original_callback_init(self, *args, **kwargs)
        where = script_lines(script, sys._getframe(1))
        if where["line"] is not None:
            setattr(self, BUILT_AT, {"line": where["line"], "code": where["code"]})

    tf.keras.callbacks.Callback.__init__ = callback_init


def install_save_hooks() -> None:
    """Model.save and save_weights note the files they write."""
    import tensorflow as tf

    for method in ("save", "save_weights"):
        original = getattr(tf.keras.Model, method)

        def saving(self, filepath, *args, _original=original, **kwargs):
            Current.record.data["saved"].append(os.fspath(filepath))
            Current.record.save()
            return _original(self, filepath, *args, **kwargs)

        setattr(tf.keras.Model, method, saving)


def install_hooks(script: str, gpus: SimulatedGpus | None = None) -> None:
    """Every hook on TensorFlow and Horovod the record needs, before the script runs."""
    install_fit_hook(script, gpus)
    install_callback_hook(script)
    install_save_hooks()
    install_collective_hooks(script)
    install_write_hooks()


WROTE_MOST = 64  # the distinct paths a rank's record lists as opened for writing
NOT_OUTPUT = ("/dev/", "/proc/", "/sys/")


def noted_write(path, mode) -> None:
    """Notes in the record that this rank opens `path` for writing, before it does (a write
    that then fails, into a folder only rank 0 made, counts too). Not the probe's own records,
    nor a file in a dot-folder (a library's cache or settings: ~/.keras, ~/.cache)."""
    record = Current.record
    if record is None or not isinstance(path, (str, bytes, os.PathLike)):
        return
    if not isinstance(mode, str) or not any(flag in mode for flag in "wax+"):
        return
    name = os.path.abspath(os.fsdecode(path))
    if name.startswith((os.path.abspath(record.folder) + os.sep, *NOT_OUTPUT)) or any(
        part.startswith(".") for part in name.split(os.sep)
    ):
        return
    wrote = record.data.setdefault("wrote", [])
    if name not in wrote and len(wrote) < WROTE_MOST:
        wrote.append(name)
        record.save()


def install_write_hooks() -> None:
    """Python's open() and TensorFlow's GFile (Keras's CSVLogger writes through it) note the
    files the script writes (step 9: only rank 0 writes, wherever it writes)."""
    import tensorflow as tf

    original_open = builtins.open

    def open_noting(file, mode="r", *args, **kwargs):
        # With an opener, the name is not what is opened: Python's NamedTemporaryFile passes
        # its folder (TensorFlow's autograph writes its generated code so, on every rank).
        if kwargs.get("opener") is None and len(args) < 6:
            noted_write(file, mode)
        return original_open(file, mode, *args, **kwargs)

    builtins.open = io.open = open_noting
    gfile = tf.io.gfile.GFile
    original_init = gfile.__init__

    def gfile_init(self, name, mode="r"):
        noted_write(name, mode)
        original_init(self, name, mode)

    gfile.__init__ = gfile_init


def install_collective_hooks(script: str) -> None:
    """hvd.broadcast(...) and the like, called from the script, note where they wait."""
    import horovod.tensorflow as hvd_tf
    import horovod.tensorflow.keras as hvd_keras

    for module in (hvd_keras, hvd_tf):
        for name in COLLECTIVES:
            original = getattr(module, name, None)
            if original is None:
                continue

            def collective(*args, _original=original, _name=name, **kwargs):
                caller = sys._getframe(1)
                if os.path.abspath(caller.f_code.co_filename) != script:
                    return _original(*args, **kwargs)
                record = Current.record
                record.data["waiting"] = {
                    "call": f"hvd.{_name}",
                    "name": kwargs.get("name"),
                    **script_lines(script, caller),
                }
                record.save()
                try:
                    return _original(*args, **kwargs)
                finally:
                    record.data["waiting"] = None
                    record.save()

            setattr(module, name, collective)

    original_wrap = hvd_keras.DistributedOptimizer

    def distributed_optimizer(optimizer, *args, **kwargs):
        """hvd.DistributedOptimizer, noting the class of what the script wrapped."""
        Current.record.data["wrapped"].append(type(optimizer).__name__)
        caller = sys._getframe(1)
        where = script_lines(script, caller)
        if os.path.abspath(caller.f_code.co_filename) == script:  # not hvd.load_model's own
            # The line the grader blames when Horovod finds the ranks' allreduces differ in
            # what this call chose (op=hvd.Sum on one rank only): grader/running/outcome.py.
            Current.record.data["wrapped_at"] = {"line": where["line"], "code": where["code"]}
        if not where["top_line"]:
            note_foreign(
                Current.record,
                f"hvd.DistributedOptimizer was called from "
                f"{caller_file(caller)}, not from the script",
            )
        return original_wrap(optimizer, *args, **kwargs)

    hvd_keras.DistributedOptimizer = distributed_optimizer


FOREIGN_KEPT = 12  # what ran that is not the script's: the first few, each once
# Names a piece of code uses when it trains with Horovod: code run from a string that uses one
# of them is training code that is not the script's.
TRAINING_NAMES = frozenset({"fit", "DistributedOptimizer", "hvd", "horovod", "run_path"})


def library_folders() -> tuple:
    """The folders of Python's own library and the installed packages, and the probe's."""
    import sysconfig

    paths = sysconfig.get_paths()
    folders = {paths.get(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders |= {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(__file__)}
    return tuple(os.path.realpath(f) + os.sep for f in folders if f)


def caller_file(frame) -> str:
    """The innermost file of the stack at `frame` that is not Python's or a package's."""
    folders = library_folders()
    while frame is not None:
        name = frame.f_code.co_filename
        if not os.path.realpath(name).startswith(folders) and not name.startswith("<frozen"):
            return name
        frame = frame.f_back
    return "a library"


def note_foreign(record, what: str) -> None:
    kept = record.data["foreign"]
    if what not in kept and len(kept) < FOREIGN_KEPT:
        kept.append(what)
        record.save()


def code_names(code) -> set:
    """Every name a code object and the functions in it use."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if hasattr(constant, "co_names"):
            names |= code_names(constant)
    return names


def watch_foreign_code(script: str) -> None:
    """An audit hook (PEP 578) notes code that is not the script's: a file run (runpy, exec of
    a compiled file), training code run from a string, a Python or a .py file started (a
    subprocess, os.system, os.exec*). Imported files are seen by foreign_modules()."""
    folders = library_folders()
    busy = []

    def own_or_library(name: str) -> bool:
        return (
            os.path.abspath(name) == script
            or name.startswith("<frozen")
            or "__autograph_generated" in name
            or os.path.realpath(name).startswith(folders)
        )

    def hook(event, args):
        if busy or Current.record is None:
            return
        busy.append(True)
        try:
            what = None
            if event == "exec" and args and hasattr(args[0], "co_filename"):
                name = args[0].co_filename
                if name.startswith("<"):
                    if code_names(args[0]) & TRAINING_NAMES and name != "<module>":
                        what = f"ran training code from a string ({name}), not the script's"
                elif not own_or_library(name):
                    what = f"ran {name}"
            elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn"):
                words = args[1] if event != "os.system" else args[0]
                text = (
                    words.decode()
                    if isinstance(words, bytes)
                    else (words if isinstance(words, str) else " ".join(map(str, words or [])))
                )
                if "python" in text or ".py" in text:
                    what = f"started {text[:160]}"
            if what:
                note_foreign(Current.record, what)
        except Exception:  # the hook must never break the script
            pass
        finally:
            busy.clear()

    sys.addaudithook(hook)


MACHINERY = set()  # the modules loaded before the script ran (the probe's, the launcher's)


def foreign_modules(script: str) -> list:
    """The modules imported from files that are neither Python's, a package's nor the script."""
    folders = library_folders()
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if (
            isinstance(path, str)
            and name not in MACHINERY
            and os.path.abspath(path) != script
            and "__autograph_generated" not in name
            and not os.path.realpath(path).startswith(folders)
        ):
            found.append(f"imported {name} from {path}")
    return found


def run_script(script: str, args: list, record: Record) -> None:
    """Runs the script as `python SCRIPT ARGS` would; its error, if any, goes to the record."""
    Current.record = record
    record.data["argv"] = args
    record.stage("started the script")
    sys.argv = [script, *args]
    try:
        runpy.run_path(script, run_name="__main__")
        for what in foreign_modules(script):
            note_foreign(record, what)
    except SystemExit as exit:
        if exit.code not in (None, 0):
            line, text = traceback_line(script, exit)
            record.data["error"] = {
                "type": "SystemExit",
                "message": str(exit.code),
                "line": line,
                "code": text,
            }
            record.save()
            raise
    except BaseException as error:
        line, text = traceback_line(script, error)
        message = str(error).strip()
        try:
            culprit = failing_object(script, error)
        except Exception:  # the record of the error matters more than who it belongs to
            culprit = None
        record.data["error"] = {
            "type": type(error).__name__,
            "message": error_line(message),
            "line": line,
            "code": text,
            "culprit": culprit,
        }
        record.save()
        raise
    record.data["finished"] = True
    record.stage("ended")


def main() -> None:
    script = os.path.abspath(sys.argv[1])
    args = sys.argv[2:]
    folder = os.environ[PROBE_DIR_VARIABLE]
    number = int(os.environ.get(RUN_NUMBER_VARIABLE, "1"))
    sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` would have it, not this folder
    record = Record(folder, script, number)
    Current.record = record
    record.stage("started")
    sys.stdout = CountedOutput(sys.stdout)
    sys.stderr = CountedOutput(sys.stderr, script)  # logging's default stream is output too
    install_argparse_hook()
    gpus = None
    if os.environ.get(SIMULATED_GPUS_VARIABLE):
        import tensorflow as tf

        if not tf.config.list_physical_devices("GPU"):  # real GPUs are left as they are
            gpus = SimulatedGpus(int(os.environ.get("HOROVOD_LOCAL_SIZE", "1")))
            gpus.install()
    install_hooks(script, gpus)
    watch_foreign_code(script)
    MACHINERY.update(sys.modules)
    if os.environ.get(PRIVATE_LOG_DIR_VARIABLE) == "all":
        args = private_log_dir(args, number)
    run_script(script, args, record)


if __name__ == "__main__":
    main()
