"""Train a WideResNet on Fashion-MNIST with TensorFlow/Keras.

Quick run on the small committed sample (paths from the workbook's top directory; seconds
per epoch on a CPU):

    python fashion_mnist.py --data-dir data/sample --epochs 2 --depth 10 --width 1

Full run on the prepared data set (`python -m workbook.fashion_data prepare`):

    python fashion_mnist.py --log-dir logs/baseline

`--model` picks the model from MODELS (default: wide_resnet).

Horovod: run it on N workers with `horovodrun -np N python fashion_mnist.py ...`.
"""

import argparse
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import tensorflow as tf

# Horovod: the Keras API of Horovod, for data-parallel training on many workers.
import horovod.tensorflow.keras as hvd

# Horovod: NovoGrad is in TensorFlow Addons; it works on TF 2.15, so hide its end-of-life notice.
warnings.filterwarnings("ignore", message=r"\s*TensorFlow Addons", category=UserWarning)
import tensorflow_addons as tfa  # noqa: E402

CLASS_NAMES = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
]

# The prepared data: python -m workbook.fashion_data prepare. The workbook's top folder is the
# first one above this script that has a data/ folder (scripts live in notebooks/, solutions/...).
SCRIPT_DIR = Path(__file__).resolve().parent
REPO_DIR = next((folder for folder in SCRIPT_DIR.parents if (folder / "data").is_dir()), SCRIPT_DIR)
DEFAULT_DATA_DIR = os.environ.get("FASHION_MNIST_DATA", REPO_DIR / "data" / "fashion_mnist")
SAMPLE_DATA_DIR = REPO_DIR / "data" / "sample"

# Settings that depend on the hardware; --preset picks one, explicit options override it.
PRESETS = {
    # The original Horovod tutorial's WRN-16-10, for GPUs: 40 epochs.
    "gpu": dict(
        depth=16,
        width=10,
        epochs=40,
        batch_size=32,
        base_lr=0.0125,
        # The learning rate x0.1 from each of these epochs on (counted from 0; step_decay).
        lr_drops=(15, 25, 35),
        # Horovod: epochs of learning rate warmup (--warmup-epochs).
        warmup_epochs=5,
    ),
    # WRN-16-1 for CPUs (WRN-10-2 trains 1.5x slower). Batches of 64: on one core a step of 64
    # images takes about 90 ms, and the fixed cost of a step (the allreduce, waiting for the
    # other worker, Keras's own work) weighs half as much as with 32 (README: Benchmarks).
    "cpu": dict(
        depth=16,
        width=1,
        epochs=5,
        batch_size=64,
        # x0.1 for the last 2 of the 5 epochs: the steps shrink and the weights settle, worth
        # 2-4 points of test accuracy over a constant rate in our runs (notebook 13).
        lr_drops=(3,),
        # Horovod: NovoGrad's steps are normalized per layer, bigger than SGD's at one rate: half
        # of SGD's rate trains steadier over these 5 epochs (notebook 12).
        base_lr=0.00625,
        # Horovod: a short warmup, as there are only 5 epochs.
        warmup_epochs=1,
    ),
}


def parse_args():
    # The preset decides the defaults of the other options, so read it first.
    preset_parser = argparse.ArgumentParser(add_help=False)
    preset_parser.add_argument(
        "--preset",
        choices=["auto", "gpu", "cpu"],
        default="auto",
        help="defaults for --depth, --width, --epochs, --batch-size, --base-lr and --lr-drops; "
        "auto: gpu if a GPU is visible",
    )
    preset = preset_parser.parse_known_args()[0].preset
    if preset == "auto":
        preset = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    defaults = PRESETS[preset]

    parser = argparse.ArgumentParser(
        description="Fashion-MNIST WideResNet example",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        parents=[preset_parser],
    )
    parser.add_argument("--model", choices=sorted(MODELS), default="wide_resnet", help="the model")
    parser.add_argument("--log-dir", default="logs/run", help="checkpoints and TensorBoard logs")
    parser.add_argument(
        "--data-dir",
        default=str(DEFAULT_DATA_DIR),
        help="directory with train.npz and test.npz (env FASHION_MNIST_DATA overrides)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=defaults["batch_size"], help="training batch size"
    )
    parser.add_argument("--val-batch-size", type=int, default=32, help="validation batch size")
    parser.add_argument("--epochs", type=int, default=defaults["epochs"], help="epochs to train")
    parser.add_argument("--base-lr", type=float, default=defaults["base_lr"], help="learning rate")
    # Horovod: the learning rate warmup of step 11.
    parser.add_argument(
        "--warmup-epochs",
        type=float,
        default=defaults["warmup_epochs"],
        help="epochs over which the learning rate grows to base-lr * workers",
    )
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    parser.add_argument("--wd", type=float, default=0.00005, help="weight decay (L2)")
    parser.add_argument(
        "--lr-drops",
        type=int,
        nargs="*",
        default=defaults["lr_drops"],
        help="epochs (from 0) from which the learning rate is x0.1 smaller, each",
    )
    parser.add_argument("--depth", type=int, default=defaults["depth"], help="WideResNet depth")
    parser.add_argument("--width", type=int, default=defaults["width"], help="WideResNet width")
    parser.add_argument(
        "--train-images", type=int, default=0, help="use only the first N training images (0: all)"
    )
    parser.add_argument(
        "--test-images", type=int, default=0, help="use only the first N test images (0: all)"
    )
    parser.add_argument(
        "--steps-per-epoch", type=int, default=0, help="training steps per epoch (0: all images)"
    )
    return parser.parse_args()


def load_fashion_mnist(data_dir, train_images=0, test_images=0):
    """Returns (x_train, y_train), (x_test, y_test) from the prepared train.npz and test.npz."""
    data_dir = Path(data_dir)
    if not (data_dir / "train.npz").is_file() or not (data_dir / "test.npz").is_file():
        sys.exit(
            f"No prepared data in {data_dir}: run `python -m workbook.fashion_data prepare` "
            f"in the workbook, or pass --data-dir {SAMPLE_DATA_DIR} for a quick run."
        )
    splits = []
    for name, count in [("train", train_images), ("test", test_images)]:
        with np.load(data_dir / f"{name}.npz") as data:
            images, labels = data["images"], data["labels"]
        if count:
            images, labels = images[:count], labels[:count]
        splits.append((images, labels))
    return splits


def wide_resnet(args, input_shape=(28, 28, 1), classes=10):
    """Returns a WideResNet-depth-width (https://arxiv.org/abs/1605.07146) as a Keras model."""
    depth, width = args.depth, args.width
    if (depth - 4) % 6:
        raise ValueError(f"WideResNet depth must be 6n+4 (10, 16, 22, 28...), not {depth}")
    blocks_per_group = (depth - 4) // 6
    l2 = tf.keras.regularizers.l2(args.wd)

    def conv(x, filters, kernel_size, strides=1):
        return tf.keras.layers.Conv2D(
            filters,
            kernel_size,
            strides=strides,
            padding="same",
            use_bias=False,
            kernel_initializer="he_normal",
            kernel_regularizer=l2,
        )(x)

    def bn_relu(x):
        x = tf.keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
        return tf.keras.layers.Activation("relu")(x)

    inputs = tf.keras.Input(shape=input_shape)
    x = conv(inputs, 16, 3)
    for filters, group_strides in [(16 * width, 1), (32 * width, 2), (64 * width, 2)]:
        for block in range(blocks_per_group):
            strides = group_strides if block == 0 else 1
            # Pre-activation basic block: BN-ReLU-conv3x3-BN-ReLU-conv3x3 plus a shortcut.
            y = bn_relu(x)
            if strides == 1 and x.shape[-1] == filters:
                shortcut = x
            else:
                shortcut = conv(y, filters, 1, strides)
            y = conv(y, filters, 3, strides)
            y = conv(bn_relu(y), filters, 3)
            x = tf.keras.layers.Add()([shortcut, y])
    x = tf.keras.layers.GlobalAveragePooling2D()(bn_relu(x))
    outputs = tf.keras.layers.Dense(classes, activation="softmax", kernel_regularizer=l2)(x)
    return tf.keras.Model(inputs, outputs, name=f"wide_resnet_{depth}_{width}")


# The models --model can pick. Each builder takes the parsed options and returns a Keras model
# for 28x28 grayscale images and 10 classes, with the registry name in the model's name.
MODELS = {
    "wide_resnet": wide_resnet,
}


def restart_epoch(log_dir):
    """Returns the epoch of the newest checkpoint-{epoch}.h5 in log_dir (0: none)."""
    epochs = [0]
    for path in Path(log_dir).glob("checkpoint-*.h5"):
        match = re.fullmatch(r"checkpoint-(\d+)\.h5", path.name)
        if match:
            epochs.append(int(match.group(1)))
    return max(epochs)


def step_decay(epoch):
    """Returns the learning rate multiplier of `epoch`: x0.1 from each of the epochs of
    args.lr_drops on (the preset's, or --lr-drops)."""
    return 0.1 ** sum(epoch >= drop for drop in args.lr_drops)


class Throughput(tf.keras.callbacks.Callback):
    """Measures images/second and the seconds of each epoch and of its training steps, and adds
    them to the logs (TensorBoard)."""

    def __init__(self, images_per_step, verbose=1):
        super().__init__()
        self.images_per_step = images_per_step
        self.verbose = verbose
        self.epoch_seconds = []
        self.step_seconds = []
        self.images_per_second = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_start = self.train_end = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.train_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        # Images/second counts training steps only; the epoch time includes validation.
        images = self.params["steps"] * self.images_per_step
        self.step_seconds.append(self.train_end - self.epoch_start)
        self.images_per_second.append(images / self.step_seconds[-1])
        self.epoch_seconds.append(time.perf_counter() - self.epoch_start)
        if logs is not None:
            logs["images_per_second"] = self.images_per_second[-1]
            logs["epoch_seconds"] = self.epoch_seconds[-1]
            logs["step_seconds"] = self.step_seconds[-1]

    def steady_images_per_second(self):
        """The mean images/s of the epochs after the first, which also builds the graph."""
        return float(np.mean(self.images_per_second[1:] or self.images_per_second or [0]))

    def on_train_end(self, logs=None):
        if self.verbose and self.epoch_seconds:
            print(
                f"Throughput: {self.steady_images_per_second():.0f} images/s (steps, epochs "
                f"after the first), {np.mean(self.epoch_seconds):.1f} s per epoch",
                flush=True,
            )


def per_class_report(model, dataset, labels):
    """Returns a text table of precision and recall (accuracy) for each class of the test set."""
    predicted = np.argmax(model.predict(dataset, verbose=0), axis=1)
    lines = [f"{'class':<12} {'precision':>9} {'recall':>7}"]
    per_class_accuracy = {}
    for index, name in enumerate(CLASS_NAMES):
        true_positives = np.sum((predicted == index) & (labels == index))
        precision = true_positives / max(np.sum(predicted == index), 1)
        recall = true_positives / max(np.sum(labels == index), 1)
        per_class_accuracy[name] = round(float(recall), 4)
        lines.append(f"{name:<12} {precision:>9.3f} {recall:>7.3f}")
    return "\n".join(lines), per_class_accuracy


args = parse_args()

# Horovod: initialize Horovod, so that this process knows its rank and the number of workers.
hvd.init()

# Horovod: pin one GPU per process (by local rank) so workers don't share GPU 0; no-op on CPUs.
gpus = tf.config.list_physical_devices("GPU")
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")

# Horovod: print progress and results on the first worker (rank 0) only, not once per worker.
verbose = 1 if hvd.rank() == 0 else 0

# Data: normalize with the training set's mean and standard deviation.
(x_train, y_train), (x_test, y_test) = load_fashion_mnist(
    args.data_dir, args.train_images, args.test_images
)
mean, std = float(x_train.mean()), float(x_train.std())


def normalize(image, label):
    image = (tf.cast(image, tf.float32) - mean) / std
    return image[..., tf.newaxis], label


def augment(image, label):
    # Random horizontal flip and a random shift of up to 2 pixels (pad, then crop back).
    image = tf.image.random_flip_left_right(image)
    image = tf.image.pad_to_bounding_box(image, 2, 2, 32, 32)
    return tf.image.random_crop(image, (28, 28, 1)), label


train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
# Horovod: give each worker its own 1/N of the images, so that no two workers train on one batch.
train_dataset = train_dataset.shard(hvd.size(), hvd.rank())
# Without tf.data's autotuner: its thread wakes up at growing intervals, up to a minute apart,
# and deleting an iterator waits for it, which model.fit does at its end (measured: 6-57 s
# after the last epoch with it, 0.05 s without). AUTOTUNE then means as many calls as cores
# and a prefetch buffer that grows when the steps wait for it.
no_autotune = tf.data.Options()
no_autotune.autotune.enabled = False
train_dataset = (
    train_dataset.shuffle(len(x_train))
    .map(normalize, num_parallel_calls=tf.data.AUTOTUNE)
    .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    .batch(args.batch_size)
    .repeat()
    .prefetch(tf.data.AUTOTUNE)
    .with_options(no_autotune)
)
test_images = tf.data.Dataset.from_tensor_slices((x_test, y_test))
test_dataset = test_images.map(normalize).batch(args.val_batch_size)
validation_dataset = test_images
# Horovod: each worker validates on its own 1/N of the test images, so that together they
# validate on each image at most once per epoch.
validation_dataset = validation_dataset.shard(hvd.size(), hvd.rank())
# Validation goes through the test images in random batches.
validation_dataset = (
    validation_dataset.shuffle(len(x_test)).map(normalize).batch(args.val_batch_size).repeat()
)
# Validation without the autotuner too (model.fit deletes its iterator at its end as well).
validation_dataset = validation_dataset.with_options(no_autotune)

steps_per_epoch = args.steps_per_epoch or len(x_train) // args.batch_size
validation_steps = len(x_test) // args.val_batch_size
# Horovod: each worker takes 1/N of the training steps and 1/N of the validation steps.
steps_per_epoch = steps_per_epoch // hvd.size()
validation_steps = validation_steps // hvd.size()
# Horovod: one step now trains on N batches, one per worker.
images_per_step = args.batch_size * hvd.size()

# Horovod: scale the learning rate by N, as each step averages the gradients of N batches.
scaled_lr = args.base_lr * hvd.size()

# Resume from the newest checkpoint in the log directory, if there is one.
checkpoint_format = os.path.join(args.log_dir, "checkpoint-{epoch}.h5")
# Horovod: rank 0 finds the checkpoint and broadcasts its epoch, so all workers resume alike.
resume_from_epoch = restart_epoch(args.log_dir) if hvd.rank() == 0 else 0
resume_from_epoch = int(hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch"))

# Horovod: only rank 0 loads the checkpoint; the broadcast callback copies its state to all.
if resume_from_epoch > 0 and hvd.rank() == 0:
    # Horovod: NovoGrad is not a Keras optimizer, so name it for hvd.load_model.
    model = hvd.load_model(
        checkpoint_format.format(epoch=resume_from_epoch),
        custom_optimizers=[tfa.optimizers.NovoGrad],
        legacy_opts=True,
    )
else:
    model = MODELS[args.model](args)
    # Horovod: NovoGrad normalizes gradients per layer, robust to large batches and learning rates.
    opt = tfa.optimizers.NovoGrad(learning_rate=scaled_lr, beta_1=0.9, beta_2=0.98)
    # Horovod: wrap the optimizer so that every step averages the gradients of all workers.
    opt = hvd.DistributedOptimizer(opt)
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    if resume_from_epoch > 0:
        # Horovod: rank 0's load_model made its optimizer's variables (iter, momentum) as it
        # loaded them; a fresh optimizer makes its own in the first step, named otherwise
        # (DistributedSGD/iter), and the broadcast, which matches names, would wait forever.
        # Make them now under the same names, with the private method load_model calls too.
        opt._create_all_weights(model.trainable_variables)
if resume_from_epoch > 0 and verbose:
    print(f"Resuming from epoch {resume_from_epoch}", flush=True)

def average_in_place(epoch, logs):
    for key in sorted(logs):
        logs[key] = float(hvd.allreduce(tf.constant(logs[key], tf.float32), name=f"mean_{key}"))


throughput = Throughput(images_per_step, verbose=verbose)
callbacks = [
    # Horovod: start all workers from rank 0's weights, not from N different random ones.
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    # Horovod: ramp the learning rate up from base_lr to base_lr * N, so training doesn't diverge.
    hvd.callbacks.LearningRateWarmupCallback(
        initial_lr=scaled_lr, warmup_epochs=args.warmup_epochs, verbose=verbose
    ),
    # Horovod: after the warmup, scaled_lr * step_decay(epoch) at the start of each epoch. Pass a
    # function: a number m would mean m ** (epoch - start_epoch), a decay every epoch.
    hvd.callbacks.LearningRateScheduleCallback(
        initial_lr=scaled_lr, start_epoch=args.warmup_epochs, multiplier=step_decay
    ),
    throughput,
    # Horovod: every worker's metrics become the workers' mean before the writers read them.
    tf.keras.callbacks.LambdaCallback(on_epoch_end=average_in_place),
]
# Horovod: write checkpoints and TensorBoard logs on rank 0 only, so that workers don't clash.
if hvd.rank() == 0:
    callbacks.append(tf.keras.callbacks.ModelCheckpoint(checkpoint_format))
    callbacks.append(tf.keras.callbacks.TensorBoard(args.log_dir))

start = time.perf_counter()
model.fit(
    train_dataset,
    steps_per_epoch=steps_per_epoch,
    epochs=args.epochs,
    initial_epoch=resume_from_epoch,
    validation_data=validation_dataset,
    validation_steps=validation_steps,
    callbacks=callbacks,
    verbose=verbose,
)
train_seconds = time.perf_counter() - start

# Evaluate on the whole test set.
test_loss, test_accuracy = model.evaluate(test_dataset, verbose=0)
if verbose:
    report, per_class_accuracy = per_class_report(model, test_dataset, y_test)
    print(f"Test loss: {test_loss:.4f}, test accuracy: {test_accuracy:.4f}")
    print(f"Training time: {train_seconds:.1f} s for epochs {resume_from_epoch + 1}-{args.epochs}")
    print(report)
    # One line for programs that read the results.
    result = {
        "model": model.name,
        "test_loss": round(test_loss, 4),
        "test_accuracy": round(test_accuracy, 4),
        "train_seconds": round(train_seconds, 1),
        "images_per_second": round(throughput.steady_images_per_second(), 1),
        "epochs": args.epochs,
        "resumed_from_epoch": resume_from_epoch,
        "per_class_accuracy": per_class_accuracy,
    }
    print("RESULT " + json.dumps(result), flush=True)
