"""What Horovod, TensorFlow and Keras really do, as the workbook tells it (notebooks/CLAIMS.md).

Run under `horovodrun -np 2` (tests/claim_runs.py does): each experiment below trains or
calls the real libraries for a few batches on the committed sample and returns what it saw,
gathered from both ranks; rank 0 prints one `CLAIM name {json}` line per experiment. The test
asserts on those values, so a version of Horovod, TensorFlow or Keras that behaves otherwise
fails it. `python two_workers.py NAME...` runs only the experiments named.
"""

import atexit
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

warnings.filterwarnings("ignore", message=r"\s*TensorFlow Addons", category=UserWarning)
import tensorflow_addons as tfa  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
EXPERIMENTS = {}


def experiment(function):
    EXPERIMENTS[function.__name__] = function
    return function


def gathered(value):
    """[rank 0's value, rank 1's value, ...]."""
    return hvd_tf.allgather_object(value)


def shared_folder():
    """A fresh folder for every rank: rank 0 makes it, and removes it when the program ends."""
    made = None
    if hvd.rank() == 0:
        made = tempfile.mkdtemp(prefix="workbook-claims-")
        atexit.register(shutil.rmtree, made, True)
    return Path(hvd_tf.broadcast_object(made))


def images(count=256, split="train"):
    with np.load(SAMPLE / f"{split}.npz") as data:
        x = data["images"][:count].astype("float32")[..., None] / 255
        return x, data["labels"][:count]


def small_model(seed=None):
    if seed is not None:
        tf.keras.utils.set_random_seed(seed)
    return tf.keras.Sequential(
        [tf.keras.Input((28, 28, 1)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)]
    )


def weight_sum(model):
    return float(sum(float(tf.reduce_sum(w)) for w in model.weights))


# A fresh process draws its own random weights; in this one, earlier experiments seeded every
# rank alike, so the experiments that need each rank's own start seed it by rank.
OWN_SEED = 1000
LOSS = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def momentum_slots(optimizer):
    """A fingerprint of SGD's momentum slots (the optimizer's own variables; 0 before its
    first step makes them)."""
    slots = [v for v in optimizer.variables() if "momentum" in v.name]
    return float(sum(float(tf.reduce_sum(tf.abs(v))) for v in slots))  # softmax: plain sums are 0


class Recorder(tf.keras.callbacks.Callback):
    """Records, at each training batch's start (after the callbacks before it in the list), the
    optimizer's learning rate and momentum and a fingerprint of the weights; and the logs each
    epoch end hands it."""

    def __init__(self):
        super().__init__()
        self.batches, self.epoch_logs = [], []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        optimizer = self.model.optimizer
        momentum = getattr(optimizer, "momentum", None) if hasattr(optimizer, "momentum") else None
        self.batches.append(
            {
                "epoch": self.epoch,
                "batch": batch,
                "lr": float(tf.keras.backend.get_value(optimizer.lr)),
                "momentum": (
                    None if momentum is None else float(tf.keras.backend.get_value(momentum))
                ),
                "weights": weight_sum(self.model),
                "slots": momentum_slots(optimizer),
            }
        )

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_logs.append({key: float(value) for key, value in (logs or {}).items()})


# ---- notebook 01: init, rank, size, local rank ------------------------------------------


@experiment
def init():
    return gathered({"rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank()})


# ---- notebook 02: no GPU here --------------------------------------------------------------


@experiment
def gpu_list():
    gpus = tf.config.list_physical_devices("GPU")
    try:
        gpus[hvd.local_rank()]
        error = None
    except IndexError as raised:
        error = type(raised).__name__
    return {"gpus": len(gpus), "indexing_error": error}


# ---- notebook 03: progress bars --------------------------------------------------------------


@experiment
def progress_bars():
    """Which Keras calls print a progress bar when not given verbose=... (on every rank)."""
    model = small_model(seed=1)
    model.compile(tf.keras.optimizers.legacy.SGD(0.01), LOSS)
    x, y = images(64)
    shown = {}
    for name, call in (
        ("fit", lambda: model.fit(x, y, batch_size=32, epochs=1)),
        ("evaluate", lambda: model.evaluate(x, y, batch_size=32)),
        ("predict", lambda: model.predict(x, batch_size=32)),
        ("fit_verbose_0", lambda: model.fit(x, y, batch_size=32, epochs=1, verbose=0)),
    ):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            call()
        shown[name] = "2/2 [" in buffer.getvalue()
    return gathered(shown)


# ---- notebook 04: the averaged step --------------------------------------------------------


@experiment
def averaged_step():
    """One step of DistributedOptimizer on 2 workers (each its own 32 images) against one step
    of plain SGD in one process on all 64 images, from the same weights."""
    x, y = images(64)
    mine = slice(32 * hvd.rank(), 32 * (hvd.rank() + 1))
    distributed = small_model(seed=3)
    distributed.compile(hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.5)), LOSS)
    distributed.fit(x[mine], y[mine], batch_size=32, epochs=1, verbose=0, shuffle=False)
    alone = small_model(seed=3)
    alone.compile(tf.keras.optimizers.legacy.SGD(0.5), LOSS)
    alone.fit(x, y, batch_size=64, epochs=1, verbose=0, shuffle=False)
    difference = max(
        float(np.max(np.abs(a - b))) for a, b in zip(distributed.get_weights(), alone.get_weights())
    )
    moved = max(
        float(np.max(np.abs(a - b)))
        for a, b in zip(distributed.get_weights(), small_model(seed=3).get_weights())
    )
    return gathered(
        {"weights": weight_sum(distributed), "vs_one_process": difference, "moved": moved}
    )


@experiment
def wrapped_twice():
    """hvd.DistributedOptimizer around a DistributedOptimizer: where it fails."""

    def train():
        model = small_model(seed=1)
        optimizer = hvd.DistributedOptimizer(
            hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.01))
        )
        model.compile(optimizer, LOSS)
        x, y = images(32)
        model.fit(x, y, batch_size=32, epochs=1, verbose=0)
        return weight_sum(model)

    return error_of(train)


@experiment
def wrapped_after_compile():
    model = small_model(seed=1)
    plain = tf.keras.optimizers.legacy.SGD(0.5)
    model.compile(plain, LOSS)
    hvd.DistributedOptimizer(plain)
    x, y = images(64)
    mine = slice(32 * hvd.rank(), 32 * (hvd.rank() + 1))
    model.fit(x[mine], y[mine], batch_size=32, epochs=1, verbose=0)
    return gathered({"optimizer": wrapped(model.optimizer), "weights": weight_sum(model)})


# ---- notebook 05: broadcast --------------------------------------------------------------


@experiment
def broadcast_variables():
    model = small_model(seed=OWN_SEED + hvd.rank())  # each worker draws its own weights
    before = weight_sum(model)
    hvd_tf.broadcast_variables(model.variables, root_rank=0)
    return gathered({"before": before, "after": weight_sum(model)})


@experiment
def broadcast_callback():
    """The weights at the start of batches 0 and 1, with and without the broadcast callback.
    And with a plain SGD (no averaging), whose momentum after batch 0 differs on each rank: at
    batch 1's start, after the callback, it is rank 0's everywhere."""
    result = {}
    for name, callbacks, wrap in (
        ("with", [hvd.callbacks.BroadcastGlobalVariablesCallback(0)], True),
        ("without", [], True),
        ("plain_sgd", [hvd.callbacks.BroadcastGlobalVariablesCallback(0)], False),
        ("plain_sgd_without", [], False),
    ):
        model = small_model(seed=OWN_SEED + hvd.rank())
        optimizer = tf.keras.optimizers.legacy.SGD(0.01, momentum=0.9)
        model.compile(hvd.DistributedOptimizer(optimizer) if wrap else optimizer, LOSS)
        recorder = Recorder()
        x, y = images(64)
        model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=callbacks + [recorder])
        result[name] = {
            "batch_0": recorder.batches[0]["weights"],
            "batch_1": recorder.batches[1]["weights"],
            "slots_batch_1": recorder.batches[1]["slots"],
            "end": weight_sum(model),
        }
    return gathered(result)


# ---- notebook 06 and 17: sharding, validation --------------------------------------------


@experiment
def shard_and_shuffle():
    """The image indices each worker reads in one pass, sharding before or after shuffling."""
    indices = tf.data.Dataset.range(3000)
    seed = 100 + hvd.rank()  # each worker shuffles in its own order, as without a seed
    orders = {
        "shard_then_shuffle": indices.shard(hvd.size(), hvd.rank()).shuffle(3000, seed=seed),
        "shuffle_then_shard": indices.shuffle(3000, seed=seed).shard(hvd.size(), hvd.rank()),
    }
    result = {}
    for name, dataset in orders.items():
        seen = np.concatenate(hvd_tf.allgather_object([int(i) for i in dataset]))
        result[name] = {"read": int(len(seen)), "distinct": int(len(set(seen.tolist())))}
    return result


@experiment
def validation_coverage():
    """The script's validation on the sample's 1,000 test images: each worker takes
    validation_steps // N batches of its own shard, shuffled and repeated. How many test images
    one epoch evaluates, on each worker and on both together."""
    x_test, _ = images(1000, "test")
    batch_size = 32
    steps = (len(x_test) // batch_size) // hvd.size()
    shard = tf.data.Dataset.range(len(x_test)).shard(hvd.size(), hvd.rank())
    batches = shard.shuffle(len(x_test)).batch(batch_size).repeat().take(steps)
    mine = np.concatenate([batch.numpy() for batch in batches])
    everyone = np.concatenate(hvd_tf.allgather_object(mine.tolist()))
    return {
        "test_images": len(x_test),
        "steps": steps,
        "read": int(len(everyone)),
        "evaluated": len(set(everyone.tolist())),
        "per_worker": len(set(mine.tolist())),
    }


@experiment
def cache_replays():
    """Notebook 17: cache() replays what the stages before it made, random ones included."""
    tf.random.set_seed(None)  # as in the script; a global seed would repeat them anyway
    dataset = tf.data.Dataset.range(100).map(
        lambda i: tf.random.uniform([]) + tf.cast(i, "float32")
    )

    def two_passes(pipeline):
        return [[float(x) for x in pipeline] for _ in range(2)]

    cached, uncached = two_passes(dataset.cache()), two_passes(dataset)
    return {"cached_same": cached[0] == cached[1], "uncached_same": uncached[0] == uncached[1]}


# ---- notebook 07: metric averaging, callback order ---------------------------------------


@experiment
def metric_average():
    """The logs a callback sees at the epoch end before and after MetricAverageCallback."""
    x, y = images(128)
    model = small_model(seed=1)
    model.compile(
        hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.01)), LOSS, metrics=["accuracy"]
    )
    before, after = Recorder(), Recorder()
    mine = slice(64 * hvd.rank(), 64 * (hvd.rank() + 1))
    model.fit(
        x[mine],
        y[mine],
        batch_size=32,
        epochs=1,
        verbose=0,
        callbacks=[
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            before,
            hvd.callbacks.MetricAverageCallback(),
            after,
        ],
    )
    return gathered({"before": before.epoch_logs[-1], "after": after.epoch_logs[-1]})


# ---- notebooks 06 and 09: two writers of one file or folder ------------------------------


@experiment
def hdf5_lock():
    """Rank 0 has checkpoint.h5 open for writing (as while it saves); rank 1 saves to it."""
    import h5py

    folder = shared_folder()
    path = folder / "checkpoint-1.h5"
    model = small_model(seed=1)
    model.compile(tf.keras.optimizers.legacy.SGD(0.01), LOSS)
    error = None
    held = h5py.File(path, "w") if hvd.rank() == 0 else None
    hvd.allreduce(tf.constant(0), name="hdf5_lock_open")  # rank 0 holds the file now
    if hvd.rank() == 1:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.save(path)
        except Exception as raised:  # noqa: BLE001 - which error it is, is the point
            error = f"{type(raised).__name__}: {raised}"
    hvd.allreduce(tf.constant(0), name="hdf5_lock_saved")
    if held is not None:
        held.close()
    return gathered(error)


@experiment
def tensorboard_two_writers():
    folder = shared_folder()
    model = small_model(seed=1)
    model.compile(hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.01)), LOSS)
    x, y = images(64)
    model.fit(
        x,
        y,
        batch_size=32,
        epochs=1,
        verbose=0,
        callbacks=[tf.keras.callbacks.TensorBoard(str(folder))],
    )
    hvd.allreduce(tf.constant(0), name="tensorboard_written")
    return len(list((folder / "train").glob("events.out.tfevents.*")))


# ---- notebook 08: resuming -----------------------------------------------------------------


def saved_checkpoint(make_optimizer):
    """A checkpoint saved by rank 0 after one step with `make_optimizer()` on every rank (one
    wrapped in DistributedOptimizer needs every rank in its step), its path on every rank."""
    path = str(shared_folder() / "checkpoint-1.h5")
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2, name="dense")])
    model.compile(make_optimizer(), "mse")
    model.fit(np.zeros((8, 4)), np.zeros((8, 2)), verbose=0)
    if hvd.rank() == 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.save(path)
    hvd.allreduce(tf.constant(0), name=f"saved {path}")
    return path


def wrapped(optimizer):
    """The optimizer's class name, and ", wrapped" for Horovod's DistributedOptimizer (a
    subclass of the same name: horovod/_keras/__init__.py, lines 248-253)."""
    return type(optimizer).__name__ + (", wrapped" if hasattr(optimizer, "_allreduce") else "")


def error_of(call):
    try:
        return {"value": call(), "error": None}
    except Exception as raised:  # noqa: BLE001 - which error it is, is the point
        return {"value": None, "error": f"{type(raised).__name__}: {raised}"}


@experiment
def load_model():
    """What each way of loading a checkpoint gives back (on each rank, from a shared file)
    that was saved, as the script saves it, with the optimizer in DistributedOptimizer: the
    saved class name is then the plain "SGD" or "NovoGrad" (not Addons' "Addons>NovoGrad")."""
    sgd = saved_checkpoint(
        lambda: hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.01, momentum=0.9))
    )
    novograd = saved_checkpoint(lambda: hvd.DistributedOptimizer(tfa.optimizers.NovoGrad(0.01)))
    new = saved_checkpoint(
        lambda: hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01, momentum=0.9))
    )

    def optimizer_class(**kwargs):
        return lambda: wrapped(hvd.load_model(**kwargs).optimizer)

    cases = {
        "legacy_opts": optimizer_class(filepath=sgd, legacy_opts=True),
        "legacy_without_legacy_opts": optimizer_class(filepath=sgd),
        "keras_load_model": lambda: wrapped(tf.keras.models.load_model(sgd).optimizer),
        "new_with_legacy_opts": optimizer_class(filepath=new, legacy_opts=True),
        "new_without_legacy_opts": optimizer_class(filepath=new),
        "novograd_plain": optimizer_class(filepath=novograd, legacy_opts=True),
        "novograd_custom_optimizers": optimizer_class(
            filepath=novograd, legacy_opts=True, custom_optimizers=[tfa.optimizers.NovoGrad]
        ),
        "novograd_class_not_list": optimizer_class(
            filepath=novograd, legacy_opts=True, custom_optimizers=tfa.optimizers.NovoGrad
        ),
        "novograd_custom_objects": optimizer_class(
            filepath=novograd,
            legacy_opts=True,
            custom_objects={"NovoGrad": tfa.optimizers.NovoGrad},
        ),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: error_of(call) for name, call in cases.items()}


@experiment
def optimizer_variable_names():
    """Notebook 08's cell: the optimizer's variable names, loaded, fresh, and made at once."""

    def tiny_model():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2, name="dense")])
        model.compile(
            optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(momentum=0.9)),
            loss="mse",
        )
        return model

    def names(model):
        return [variable.name for variable in model.optimizer.variables()]

    path = saved_checkpoint(lambda: tf.keras.optimizers.legacy.SGD(momentum=0.9))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = names(hvd.load_model(path, legacy_opts=True))
    fresh = tiny_model()
    before = names(fresh)
    fresh.fit(np.zeros((8, 4)), np.zeros((8, 2)), verbose=0)
    made = tiny_model()
    made.optimizer._create_all_weights(made.trainable_variables)
    return {
        "loaded": loaded,
        "fresh_before": before,
        "fresh_after": names(fresh),
        "created": names(made),
    }


def resume(create_weights: bool):
    """Rank 0 loads a checkpoint, rank 1 builds a fresh model (and, with `create_weights`,
    makes its optimizer's variables at once); one epoch with the broadcast callback."""
    path = saved_checkpoint(
        lambda: hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.01, 0.9))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if hvd.rank() == 0:
            model = hvd.load_model(path, legacy_opts=True)
        else:
            model = tf.keras.Sequential(
                [tf.keras.Input((4,)), tf.keras.layers.Dense(2, name="dense")]
            )
            optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.01, 0.9))
            model.compile(optimizer, "mse")
            if create_weights:
                optimizer._create_all_weights(model.trainable_variables)
    print(f"rank {hvd.rank()} training", flush=True)
    model.fit(
        np.ones((8, 4)),
        np.ones((8, 2)),
        batch_size=8,
        initial_epoch=1,
        epochs=2,
        verbose=0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
    )
    return gathered(weight_sum(model))


@experiment
def resume_with_created_weights():
    """Rank 0 loads the checkpoint, rank 1 builds a fresh model and makes its optimizer's
    variables at once; the broadcast callback then copies rank 0's state (no hang)."""
    return resume(create_weights=True)


# ---- notebooks 10 and 11: learning rates ---------------------------------------------------


def schedule_run(callbacks_of, optimizer="sgd", warmup=2, drops=(3,), epochs=5, steps=3):
    """Trains a few batches with the callbacks `callbacks_of(scaled_lr, step_decay, warmup)`
    returns; the learning rate and momentum at every batch, and the final weights."""
    tf.keras.utils.set_random_seed(1)
    scaled_lr = 0.0125 * hvd.size()

    def step_decay(epoch):
        return 0.1 ** sum(epoch >= drop for drop in drops)

    model = small_model()
    if optimizer == "sgd":
        base = tf.keras.optimizers.legacy.SGD(scaled_lr, momentum=0.9)
    else:
        base = tfa.optimizers.NovoGrad(scaled_lr, beta_1=0.9, beta_2=0.98)
    model.compile(hvd.DistributedOptimizer(base), LOSS)
    recorder = Recorder()
    x, y = images(256)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shard(hvd.size(), hvd.rank())
    model.fit(
        dataset.batch(16).repeat(),
        steps_per_epoch=steps,
        epochs=epochs,
        verbose=0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
        + callbacks_of(scaled_lr, step_decay, warmup)
        + [recorder],
    )
    return {
        "scaled_lr": scaled_lr,
        "lr": [row["lr"] for row in recorder.batches],
        "momentum": [row["momentum"] for row in recorder.batches],
        "first_batches": [i for i, row in enumerate(recorder.batches) if row["batch"] == 0],
        "weights": [w.tolist() for w in model.get_weights()][1],
    }


def warmup_callback(scaled_lr, warmup):
    return hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=warmup)


def horovod_schedule(scaled_lr, step_decay, warmup):
    return hvd.callbacks.LearningRateScheduleCallback(
        initial_lr=scaled_lr, start_epoch=warmup, multiplier=step_decay
    )


def keras_schedule(scaled_lr, step_decay, warmup):
    return tf.keras.callbacks.LearningRateScheduler(lambda epoch: scaled_lr * step_decay(epoch))


SCHEDULES = {
    # Step 11's reference: the warmup, then Horovod's schedule from the warmup's end.
    "horovod": lambda lr, decay, w: [warmup_callback(lr, w), horovod_schedule(lr, decay, w)],
    # The starting script's Keras schedule kept beside the warmup, after it or before it.
    "keras_after": lambda lr, decay, w: [warmup_callback(lr, w), keras_schedule(lr, decay, w)],
    "keras_before": lambda lr, decay, w: [keras_schedule(lr, decay, w), warmup_callback(lr, w)],
    # Horovod's schedule from epoch 0, over the warmup.
    "horovod_from_0": lambda lr, decay, w: [warmup_callback(lr, w), horovod_schedule(lr, decay, 0)],
    # Horovod's older examples: a number as multiplier.
    "number": lambda lr, decay, w: [
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=lr, start_epoch=1, multiplier=0.1)
    ],
    # Step 10: the scaled rate from the first step, Keras's schedule alone.
    "keras_alone": lambda lr, decay, w: [keras_schedule(lr, decay, w)],
    # Horovod's schedule with a Keras one left beside it that keeps the scaled rate.
    "keras_beside_horovod": lambda lr, decay, w: [
        warmup_callback(lr, w),
        horovod_schedule(lr, decay, w),
        tf.keras.callbacks.LearningRateScheduler(lambda epoch: lr),
    ],
}


@experiment
def schedules():
    """Every SCHEDULES entry with SGD (momentum 0.9): 2 warmup epochs, x0.1 from epoch 3."""
    return {name: schedule_run(callbacks_of) for name, callbacks_of in SCHEDULES.items()}


@experiment
def schedules_novograd():
    return {
        name: schedule_run(SCHEDULES[name], optimizer="novograd")
        for name in ("horovod", "keras_after")
    }


@experiment
def schedules_long_warmup():
    """A warmup (4 epochs) longer than the first drop (epoch 3)."""
    return {
        name: schedule_run(SCHEDULES[name], warmup=4, drops=(3,), epochs=6, steps=2)
        for name in ("horovod", "keras_after")
    }


@experiment
def scaled_rate():
    """One epoch of 1/N of the steps on N workers: the loss after it, at the base rate and at
    N times the base rate."""
    x, y = images(512)
    losses = {}
    for name, rate in (("base", 0.01), ("scaled", 0.01 * hvd.size())):
        model = small_model(seed=5)
        model.compile(hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(rate)), LOSS)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).shard(hvd.size(), hvd.rank())
        model.fit(
            dataset.batch(32),
            epochs=1,
            verbose=0,
            callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
        )
        losses[name] = float(model.evaluate(x, y, verbose=0))
    return losses


@experiment
def warmup_default():
    import inspect

    signature = inspect.signature(hvd.callbacks.LearningRateWarmupCallback.__init__)
    return signature.parameters["warmup_epochs"].default


# ---- notebook 16: the models ------------------------------------------------------------


@experiment
def model_sizes():
    """The weights of the reference bonus script's two models (its builders, without the rest
    of the script, which would parse this process's options)."""
    import ast

    source = (SAMPLE.parents[1] / "solutions" / "bonus" / "fashion_mnist_alexnet.py").read_text()
    builders = [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)]
    namespace = {"tf": tf}
    exec(compile(ast.Module(body=builders, type_ignores=[]), "builders", "exec"), namespace)
    args = type("Args", (), {"wd": 5e-4, "depth": 16, "width": 1})
    return {name: namespace[name](args).count_params() for name in ("alexnet", "wide_resnet")}


# ---- notebook 12: NovoGrad -------------------------------------------------------------------


@experiment
def novograd_first_step():
    """Notebook 12's cell: how far each layer moves in one step of SGD and of NovoGrad."""
    gradients = [tf.fill([100], 0.001), tf.fill([100], 10.0)]

    def first_step(optimizer):
        layers = [tf.Variable(tf.zeros(100)) for _ in gradients]
        optimizer.apply_gradients(zip(gradients, layers))
        return [float(tf.norm(layer)) for layer in layers]

    return {
        "sgd": first_step(tf.keras.optimizers.legacy.SGD(learning_rate=0.1)),
        "novograd": first_step(tfa.optimizers.NovoGrad(learning_rate=0.1)),
        "novograd_has_momentum": hasattr(tfa.optimizers.NovoGrad(0.1), "momentum"),
    }


# ---- notebook 08: what the fix prevents (a hang: run it alone, under a time limit) ----------


@experiment
def resume_without_created_weights():
    """As resume_with_created_weights, without _create_all_weights on rank 1: the broadcast
    callback matches variables by name, and the names differ. It does not return."""
    return resume(create_weights=False)


@experiment
def api():
    """Names the checker's messages rely on."""
    return {
        "keras_has_broadcast_object": hasattr(hvd, "broadcast_object"),
        "tensorflow_has_broadcast_object": hasattr(hvd_tf, "broadcast_object"),
        "before_init": BEFORE_INIT,
        # Notebook 08: hvd.broadcast returns a tensor; int(...) makes it the number fit expects.
        "broadcast_returns": type(hvd.broadcast(3 if hvd.rank() == 0 else 0, 0, "epoch")).__name__,
        "broadcast_int": gathered(int(hvd.broadcast(3 if hvd.rank() == 0 else 0, 0, "epoch2"))),
        # Step 8's check: the wrapper is a new optimizer; variables made in the inner one stay there.
        "wrapper_variables": wrapper_variables(),
    }


def wrapper_variables():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2, name="dense")])
    inner = tf.keras.optimizers.legacy.SGD(0.01, momentum=0.9)
    wrapper = hvd.DistributedOptimizer(inner)
    inner._create_all_weights(model.trainable_variables)
    return {
        "same_object": wrapper is inner,
        "inner": len(inner.variables()),
        "wrapper": len(wrapper.variables()),
    }


def before_init():
    """What asking Horovod a question before hvd.init() does."""
    return error_of(hvd.rank)


# ---- steps 4 and 8's checks: a collective on rank 0 only (a hang: run it alone) ----------


@experiment
def distributed_optimizer_on_rank_0_only():
    """Only rank 0 trains with a DistributedOptimizer; rank 1 goes on to the next collective."""
    if hvd.rank() == 0:
        model = small_model(seed=1)
        model.compile(hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.01)), LOSS)
        x, y = images(32)
        print("rank 0 training", flush=True)
        model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    else:
        print("rank 1 training", flush=True)
    return gathered(hvd.rank())


# These do not return: run them only when named, under a time limit.
HANGS = {"resume_without_created_weights", "distributed_optimizer_on_rank_0_only"}
BEFORE_INIT = None


def main(names):
    global BEFORE_INIT
    BEFORE_INIT = before_init()
    hvd.init()
    for name in names or [name for name in EXPERIMENTS if name not in HANGS]:
        value = EXPERIMENTS[name]()
        if hvd.rank() == 0:
            print(f"CLAIM {name} {json.dumps(value)}", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main(sys.argv[1:])
