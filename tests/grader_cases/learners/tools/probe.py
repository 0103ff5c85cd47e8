"""Runs a corpus script unchanged (runpy, as __main__) and prints what this rank did, as lines
`PROBE {json}`, for the truth of tests/grader_cases/learners/truth.json.

    horovodrun -np 2 -H localhost:2 python tests/grader_cases/learners/tools/probe.py SCRIPT ARGS

What it records (nothing is sent between ranks: compare the ranks' lines afterwards):
- model.fit's arguments (epochs, initial_epoch, steps, validation steps, verbose) and the class
  of each callback in the order given;
- the learning rate at the start of every batch and the end of every epoch;
- the loss each callback saw at on_epoch_end, and the rank's own loss before any callback;
- a fingerprint of the trainable weights (BatchNorm's moving statistics stay per rank) after the first batch's callbacks and at the end of training;
- the optimizer's class and, when it is Horovod's, what its gradient allreduce makes of
  [rank + 1] on every rank (1.5 on 2 ranks: average; 3.0: sum);
- calls of hvd.load_model / tf.keras.models.load_model, hvd.broadcast, Dataset.shard;
- PROBE_KEYED=1 (with --data-dir from make_keyed_data.py): the images of the first epoch of the
  training and validation datasets (indices of the keyed data);
- PROBE_GPUS=N: tf.config reports N fake GPUs, and the calls that pin them are recorded;
  PROBE_TWO_HOSTS=1: hvd.local_rank() is 0 and hvd.local_size() 1 on every worker, as on 2
  hosts with one worker each.
"""

import json
import os
import runpy
import sys
import traceback

import numpy as np
import tensorflow as tf

RANK = int(os.environ.get("HOROVOD_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))


def _plain(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def emit(kind, **data):
    for key in ("loss", "val_loss"):
        if key in data:
            data[key] = _plain(data[key])
    print("PROBE " + json.dumps({"rank": RANK, "kind": kind, **data}, default=str), flush=True)


def fingerprint(model):
    total = 0.0
    weighted = 0.0
    for index, weight in enumerate(model.trainable_weights):
        weight = weight.numpy()
        values = np.asarray(weight, dtype=np.float64)
        total += float(values.sum())
        weighted += float((values * (index + 1)).sum())
    return f"{total:.9e}/{weighted:.9e}"


def current_lr(model):
    try:
        return float(tf.keras.backend.get_value(model.optimizer.lr))
    except Exception:  # noqa: BLE001
        try:
            return float(tf.keras.backend.get_value(model.optimizer.learning_rate))
        except Exception:  # noqa: BLE001
            return None


# --- fake GPUs ---------------------------------------------------------------------------
FAKE_GPUS = int(os.environ.get("PROBE_GPUS", "0"))
if FAKE_GPUS:
    fakes = [
        tf.config.PhysicalDevice(name=f"/physical_device:GPU:{i}", device_type="GPU")
        for i in range(FAKE_GPUS)
    ]
    real_list = tf.config.list_physical_devices

    def fake_list(device_type=None):
        if device_type == "GPU":
            return list(fakes)
        found = real_list(device_type)
        return found + (list(fakes) if device_type is None else [])

    def fake_visible(devices, device_type=None):
        chosen = [devices] if isinstance(devices, tf.config.PhysicalDevice) else list(devices)
        if device_type == "GPU" or (chosen and all(d.device_type == "GPU" for d in chosen)):
            emit("set_visible_devices", gpus=[d.name for d in chosen])
            return None
        return tf_set_visible(devices, device_type)

    def fake_growth(device, enable):
        emit("set_memory_growth", gpu=device.name, enable=bool(enable))

    tf_set_visible = tf.config.set_visible_devices
    tf.config.list_physical_devices = fake_list
    tf.config.experimental.list_physical_devices = fake_list
    tf.config.set_visible_devices = fake_visible
    tf.config.experimental.set_visible_devices = fake_visible
    tf.config.experimental.set_memory_growth = fake_growth
    tf.config.set_memory_growth = fake_growth if hasattr(tf.config, "set_memory_growth") else None
    tf.config.get_visible_devices = lambda device_type=None: (
        list(fakes) if device_type == "GPU" else tf.config.list_logical_devices(device_type)
    )


# --- Horovod calls -----------------------------------------------------------------------
import horovod.tensorflow.keras as hvd  # noqa: E402

_real_load = hvd.load_model


def probe_hvd_load(*args, **kwargs):
    emit("load_model", how="hvd.load_model", path=args[0] if args else kwargs.get("filepath"),
         custom_optimizers=[getattr(o, "__name__", str(o)) for o in kwargs.get("custom_optimizers") or []])
    return _real_load(*args, **kwargs)


hvd.load_model = probe_hvd_load

if os.environ.get("PROBE_TWO_HOSTS") == "1":
    # As if each worker were alone on its own host (2 hosts x 1 slot): local rank 0, local size 1.
    hvd.local_rank = lambda *a, **k: 0
    hvd.local_size = lambda *a, **k: 1
_real_keras_load = tf.keras.models.load_model


def probe_keras_load(*args, **kwargs):
    emit("load_model", how="tf.keras.models.load_model", path=args[0] if args else None)
    return _real_keras_load(*args, **kwargs)


tf.keras.models.load_model = probe_keras_load
_real_broadcast = hvd.broadcast


def probe_broadcast(value, root_rank, *args, **kwargs):
    result = _real_broadcast(value, root_rank, *args, **kwargs)
    try:
        emit("broadcast", sent=float(np.asarray(value)), got=float(np.asarray(result)),
             root_rank=root_rank)
    except Exception:  # noqa: BLE001
        emit("broadcast", root_rank=root_rank)
    return result


hvd.broadcast = probe_broadcast
_real_shard = tf.data.Dataset.shard


def probe_shard(self, num_shards, index, *args, **kwargs):
    emit("shard", num_shards=int(num_shards), index=int(index),
         element_spec=str(self.element_spec)[:120])
    return _real_shard(self, num_shards, index, *args, **kwargs)


tf.data.Dataset.shard = probe_shard


# --- keyed data ----------------------------------------------------------------------------
def keyed_indices(dataset, steps, data_dir):
    if dataset is None or not steps:
        return None
    with np.load(os.path.join(data_dir, "train.npz")) as data:
        train = data["images"]
    mean, std = float(train.mean()), float(train.std())
    indices = []
    for images, labels in dataset.take(int(steps)):
        images = np.asarray(images)
        centre = images.reshape(images.shape[0], 28, 28, -1)[:, 14, 14, 0]
        levels = np.rint(centre * std + mean).astype(int)
        for level, label in zip(levels, np.asarray(labels)):
            indices.append(int((level - 10) // 4 * 10 + int(label)))
    return indices


def data_dir_of_argv():
    argv = sys.argv
    for i, arg in enumerate(argv):
        if arg == "--data-dir" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--data-dir="):
            return arg.split("=", 1)[1]
    return None


# --- model.fit ---------------------------------------------------------------------------
class RawLoss(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        emit("raw_logs", epoch=epoch, loss=logs.get("loss"), val_loss=logs.get("val_loss"))


class Watch(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batch_lrs = []
        self.first_batch_done = False

    def on_train_begin(self, logs=None):
        emit("train_begin", weights=fingerprint(self.model), lr=current_lr(self.model))

    def on_epoch_begin(self, epoch, logs=None):
        self.batch_lrs = []
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        self.batch_lrs.append(current_lr(self.model))

    def on_train_batch_end(self, batch, logs=None):
        if not self.first_batch_done:
            self.first_batch_done = True
            emit("after_first_batch", weights=fingerprint(self.model))

    def on_epoch_end(self, epoch, logs=None):
        lrs = [round(x, 8) if x is not None else None for x in self.batch_lrs]
        emit("epoch", epoch=epoch, batch_lrs=lrs, end_lr=current_lr(self.model),
             loss=(logs or {}).get("loss"), val_loss=(logs or {}).get("val_loss"))

    def on_train_end(self, logs=None):
        emit("train_end", weights=fingerprint(self.model))
        opt = self.model.optimizer
        allreduce = getattr(opt, "_allreduce_grads", None)
        info = {"optimizer": type(opt).__name__,
                "bases": [b.__name__ for b in type(opt).__mro__[1:4]]}
        if allreduce is not None and hvd.is_initialized():
            try:
                var = tf.Variable(tf.zeros([3]), name="probe_var")
                out = allreduce([tf.ones([3]) * (hvd.rank() + 1)], [var])
                info["allreduce_of_rank_plus_1"] = float(np.asarray(out[0])[0])
            except Exception as error:  # noqa: BLE001
                info["allreduce_error"] = repr(error)[:200]
        emit("optimizer", **info)


def wrap_on_epoch_end(callback):
    original = callback.on_epoch_end

    def on_epoch_end(epoch, logs=None):
        emit("callback_saw", callback=type(callback).__name__, epoch=epoch,
             loss=(logs or {}).get("loss"), val_loss=(logs or {}).get("val_loss"))
        return original(epoch, logs)

    callback.on_epoch_end = on_epoch_end


_real_fit = tf.keras.Model.fit


def probe_fit(self, x=None, *args, **kwargs):
    callbacks = list(kwargs.get("callbacks") or [])
    described = []
    for callback in callbacks:
        entry = type(callback).__name__
        verbose = getattr(callback, "verbose", None)
        if verbose is not None:
            entry += f"(verbose={verbose})"
        if getattr(callback, "images_per_step", None) is not None:
            entry += f"[images_per_step={callback.images_per_step}]"
        described.append(entry)
        if type(callback).__name__ in ("TensorBoard", "ModelCheckpoint", "Throughput", "CSVLogger"):
            wrap_on_epoch_end(callback)
    emit("fit", epochs=kwargs.get("epochs"), initial_epoch=kwargs.get("initial_epoch", 0),
         steps_per_epoch=kwargs.get("steps_per_epoch"),
         validation_steps=kwargs.get("validation_steps"), verbose=kwargs.get("verbose", "auto"),
         callbacks=described, optimizer=type(self.optimizer).__name__,
         horovod=[hvd.rank(), hvd.size(), hvd.local_rank()] if hvd.is_initialized() else None,
         initial_lr=current_lr(self))
    if os.environ.get("PROBE_KEYED") == "1":
        data_dir = data_dir_of_argv()
        emit("keyed", train=keyed_indices(x, kwargs.get("steps_per_epoch"), data_dir),
             validation=keyed_indices(kwargs.get("validation_data"),
                                      kwargs.get("validation_steps"), data_dir))
    kwargs["callbacks"] = [RawLoss()] + callbacks + [Watch()]
    try:
        return _real_fit(self, x, *args, **kwargs)
    except BaseException as error:
        emit("fit_error", error=repr(error)[:300])
        raise


tf.keras.Model.fit = probe_fit

if __name__ == "__main__":
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as error:
        emit("script_error", error=repr(error)[:300], where=traceback.format_exc().splitlines()[-3:])
        raise
    emit("done")
