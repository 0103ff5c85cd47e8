"""How fast can the input pipeline feed the model? Images/second of tf.data variants, per worker.

The finished solution (solutions/fashion_mnist_solution.py) feeds its WideResNet with a tf.data
pipeline: shard, shuffle, map(normalize), map(augment), batch, repeat, prefetch. This script
builds that pipeline in several variants and measures how many images per second each one
delivers, alone (nothing trains) and then in front of the real model, so you can see when the
pipeline and not the model sets the pace. From the workbook's top directory:

    python solutions/bonus/input_pipeline.py --data-dir data/sample --batches 50
    horovodrun --gloo -np 2 -H localhost:2 python solutions/bonus/input_pipeline.py \
        --data-dir data/sample --batches 50 --decode-cost 40

The variants (--variants, comma-separated; each is measured without and with augmentation):

    sequential  map() one image at a time, no prefetch
    parallel    map(..., num_parallel_calls=AUTOTUNE), no prefetch
    prefetch    parallel map and prefetch(AUTOTUNE): the solution's pipeline
    cache       decode and normalize once, cache(), then shuffle, augment, prefetch

--decode-cost N adds N rounds of a small matrix product to every image's first map, standing in
for the work of decoding a compressed image (JPEG, PNG) that Fashion-MNIST, stored as raw
pixels, never needs. Every worker measures the same number of batches after the same number of
warm-up batches; the last line on rank 0 is `RESULT {json}` with each variant's images/second
per worker and in total (the sum over workers, from an allreduce).
"""

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

# Horovod: rank, size and the collectives that sum the workers' measurements.
import horovod.tensorflow.keras as hvd

# This script is one folder deeper (solutions/bonus/) than the solution.
REPO_DIR = Path(__file__).resolve().parents[2]
DEFAULT_DATA_DIR = os.environ.get("FASHION_MNIST_DATA", REPO_DIR / "data" / "fashion_mnist")
SAMPLE_DATA_DIR = REPO_DIR / "data" / "sample"

VARIANTS = ("sequential", "parallel", "prefetch", "cache")
AUGMENT_CHOICES = {"both": (False, True), "off": (False,), "on": (True,)}
# The model's consumption rate: training on one batch held in memory, so input costs nothing.
IN_MEMORY = "in-memory"
EXIT_BAD_OPTION = 2


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse that reports a bad option in one line (no usage block), exit code 2."""

    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(EXIT_BAD_OPTION)


def variant_list(text):
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown variant {', '.join(map(repr, unknown)) or repr(text)}; "
            f"choose from {', '.join(VARIANTS)} (comma-separated)"
        )
    return list(dict.fromkeys(names))  # in the order given, each once


def at_least(minimum):
    def number(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return number


def parse_args(argv=None):
    parser = OneLineErrorParser(
        description="Images/second of tf.data input pipeline variants (Horovod-aware)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--data-dir",
        default=str(DEFAULT_DATA_DIR),
        help="directory with train.npz (env FASHION_MNIST_DATA overrides)",
    )
    parser.add_argument(
        "--train-images", type=at_least(0), default=0, help="use the first N images (0: all)"
    )
    parser.add_argument("--batch-size", type=at_least(1), default=32, help="images per batch")
    parser.add_argument(
        "--batches", type=at_least(1), default=200, help="batches measured per variant"
    )
    parser.add_argument(
        "--warmup-batches",
        type=at_least(0),
        default=20,
        help="batches read before the clock starts (cache: at least one pass over the shard)",
    )
    parser.add_argument(
        "--variants",
        type=variant_list,
        default=list(VARIANTS),
        help=f"comma-separated, from {','.join(VARIANTS)}",
    )
    parser.add_argument(
        "--augment",
        choices=sorted(AUGMENT_CHOICES),
        default="both",
        help="measure each variant without augmentation, with it, or both",
    )
    parser.add_argument(
        "--decode-cost",
        type=at_least(0),
        default=0,
        help="rounds of extra CPU work per image in the first map, a stand-in for decoding",
    )
    parser.add_argument(
        "--train-batches",
        type=at_least(0),
        default=30,
        help="training steps measured with the model (0: measure the pipelines only)",
    )
    parser.add_argument("--depth", type=at_least(4), default=16, help="WideResNet depth")
    parser.add_argument("--width", type=at_least(1), default=1, help="WideResNet width")
    return parser.parse_args(argv)


def load_train_images(data_dir, count):
    """(images, labels) of train.npz, the first `count` of them (0: all); exit 2 if missing."""
    path = Path(data_dir) / "train.npz"
    if not path.is_file():
        print(
            f"input_pipeline.py: error: no {path}: run `python -m workbook.fashion_data prepare`, "
            f"or pass --data-dir {SAMPLE_DATA_DIR}",
            file=sys.stderr,
        )
        sys.exit(EXIT_BAD_OPTION)
    with np.load(path) as data:
        images, labels = data["images"], data["labels"]
    return (images[:count], labels[:count]) if count else (images, labels)


# --- the model: the same WideResNet as fashion_mnist_solution.py (tests keep them identical) ---


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


# --- the pipeline's maps ------------------------------------------------------------------


def augment(image, label):
    # Random horizontal flip and a random shift of up to 2 pixels (pad, then crop back).
    image = tf.image.random_flip_left_right(image)
    image = tf.image.pad_to_bounding_box(image, 2, 2, 32, 32)
    return tf.image.random_crop(image, (28, 28, 1)), label


def make_normalize(mean, std, decode_cost):
    """The solution's normalize, after `decode_cost` rounds of simulated decoding work."""
    # A fixed 28x28 matrix: each round multiplies the image by it (about 22,000 multiply-adds).
    mixer = tf.constant(np.random.default_rng(0).normal(0, 0.2, (28, 28)), tf.float32)

    def simulated_decode(image):
        pixels = tf.cast(image, tf.float32) / 255.0
        _, work = tf.while_loop(
            lambda i, x: i < decode_cost,
            lambda i, x: (i + 1, tf.tanh(tf.matmul(x, mixer))),
            (tf.constant(0), pixels),
        )
        # The image comes out unchanged, but only after the work is done (tanh is never NaN).
        return tf.where(tf.math.is_nan(tf.reduce_sum(work)), tf.zeros_like(image), image)

    def normalize(image, label):
        if decode_cost:
            image = simulated_decode(image)
        image = (tf.cast(image, tf.float32) - mean) / std
        return image[..., tf.newaxis], label

    return normalize


def build_pipeline(variant, images, labels, normalize, use_augment, batch_size):
    """The solution's training pipeline, in one of the VARIANTS, with or without augment."""
    parallel = None if variant == "sequential" else tf.data.AUTOTUNE
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    # Horovod: shard before shuffling, so each worker shuffles its own distinct 1/N.
    dataset = dataset.shard(hvd.size(), hvd.rank())
    if variant == "cache":
        # Decode and normalize each image once; shuffle and augment anew on every pass.
        dataset = dataset.map(normalize, num_parallel_calls=parallel).cache()
        dataset = dataset.shuffle(len(images))
    else:
        dataset = dataset.shuffle(len(images)).map(normalize, num_parallel_calls=parallel)
    if use_augment:
        dataset = dataset.map(augment, num_parallel_calls=parallel)
    dataset = dataset.batch(batch_size).repeat()
    if variant in ("prefetch", "cache"):
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return dataset


# --- measuring ----------------------------------------------------------------------------


def barrier():
    """Waits until every worker gets here, so that the workers measure at the same time."""
    hvd.allreduce(tf.constant(0.0), op=hvd.Sum, name="barrier")


def pipeline_rate(dataset, warmup_batches, batches, batch_size):
    """Images/second that this worker reads from `dataset`, after `warmup_batches`."""
    barrier()
    iterator = iter(dataset)
    for _ in range(warmup_batches):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    seconds = time.perf_counter() - start
    del iterator  # stops its background threads before the next variant starts
    gc.collect()
    return batches * batch_size / seconds


class StepTimer(tf.keras.callbacks.Callback):
    """The seconds between the end of warm-up step `warmup` and the end of the last step."""

    def __init__(self, warmup):
        super().__init__()
        self.warmup = warmup
        self.start = self.end = None

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if batch == self.warmup - 1:
            self.start = now
        self.end = now

    @property
    def seconds(self):
        return self.end - self.start


def training_rate(model, dataset, warmup_batches, batches, batch_size):
    """Images/second this worker trains the model on `dataset` (one Horovod step per batch)."""
    barrier()
    timer = StepTimer(warmup_batches)
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0), timer]
    model.fit(
        dataset,
        steps_per_epoch=warmup_batches + batches,
        epochs=1,
        callbacks=callbacks,
        verbose=0,
    )
    return batches * batch_size / timer.seconds


def across_workers(rate, name):
    """This worker's images/second, as every worker's (rank order) and their sum."""
    value = tf.constant([rate], tf.float64)
    per_worker = [round(float(r), 1) for r in np.asarray(hvd.allgather(value, name=f"{name}.all"))]
    total = float(np.asarray(hvd.allreduce(value, op=hvd.Sum, name=f"{name}.sum"))[0])
    return {"per_worker": per_worker, "total": round(total, 1)}


def sharding_check(count):
    """Shard-then-shuffle vs shuffle-then-shard over one pass: distinct, repeated, missed ids."""
    report = {}
    ids = tf.data.Dataset.range(count)
    orders = {
        "shard_then_shuffle": ids.shard(hvd.size(), hvd.rank()).shuffle(count),
        "shuffle_then_shard": ids.shuffle(count).shard(hvd.size(), hvd.rank()),
    }
    for order, dataset in orders.items():
        mine = np.fromiter(dataset.as_numpy_iterator(), dtype=np.int64)
        everyone = np.asarray(hvd.allgather(tf.constant(mine), name=f"sharding.{order}"))
        distinct = len(np.unique(everyone))
        report[order] = {
            "distinct": distinct,
            "repeated": int(len(everyone) - distinct),
            "missed": int(count - distinct),
        }
    return report


def label(variant, use_augment):
    return f"{variant}{' + augment' if use_augment else ''}"


def main(argv=None):
    args = parse_args(argv)
    tf.get_logger().setLevel("ERROR")  # no notes that Horovod's first-step broadcast is slow
    images, labels = load_train_images(args.data_dir, args.train_images)

    # Horovod: initialize, so that this process knows its rank and the number of workers.
    hvd.init()
    # Horovod: the numbers are printed once, by rank 0.
    verbose = hvd.rank() == 0
    shard_images = len(range(hvd.rank(), len(images), hvd.size()))
    if shard_images < args.batch_size:
        if verbose:
            print(
                f"input_pipeline.py: error: {len(images)} images make fewer than one batch of "
                f"{args.batch_size} per worker; use more --train-images or a smaller --batch-size",
                file=sys.stderr,
            )
        sys.exit(EXIT_BAD_OPTION)
    # The cache is only filled after one pass over this worker's shard: measure after that.
    batches_per_pass = -(-shard_images // args.batch_size)
    normalize = make_normalize(float(images.mean()), float(images.std()), args.decode_cost)

    if verbose:
        print(
            f"{hvd.size()} worker(s), {shard_images} images per worker, batches of "
            f"{args.batch_size}; {args.batches} batches measured per variant, decode cost "
            f"{args.decode_cost}",
            flush=True,
        )
    pipelines = []
    for variant in args.variants:
        warmup = max(args.warmup_batches, batches_per_pass) if variant == "cache" else (
            args.warmup_batches
        )
        for use_augment in AUGMENT_CHOICES[args.augment]:
            dataset = build_pipeline(
                variant, images, labels, normalize, use_augment, args.batch_size
            )
            rate = pipeline_rate(dataset, warmup, args.batches, args.batch_size)
            rates = across_workers(rate, f"pipeline.{variant}.{use_augment}")
            pipelines.append(
                {"variant": variant, "augment": use_augment, "warmup_batches": warmup, **rates}
            )
            if verbose:
                print(
                    f"pipeline {label(variant, use_augment):<22} {rates['total']:>10,.0f} images/s "
                    f"(per worker: {', '.join(f'{r:,.0f}' for r in rates['per_worker'])})",
                    flush=True,
                )

    training = []
    if args.train_batches:
        # Train behind the slowest and the fastest pipeline, with augmentation when it was
        # measured (the solution trains with it), and behind no pipeline at all.
        augmented = [p for p in pipelines if p["augment"]] or pipelines
        slowest = min(augmented, key=lambda p: p["total"])
        fastest = max(augmented, key=lambda p: p["total"])
        model = wide_resnet(argparse.Namespace(depth=args.depth, width=args.width, wd=0.00005))
        opt = tf.keras.optimizers.legacy.SGD(learning_rate=0.0125 * hvd.size(), momentum=0.9)
        # Horovod: every step averages the gradients of all workers, as in the solution.
        model.compile(
            optimizer=hvd.DistributedOptimizer(opt), loss="sparse_categorical_crossentropy"
        )
        warmup = max(2, args.warmup_batches)  # the first step also builds the graph: seconds
        feeds = [(IN_MEMORY, None)] + [
            (p["variant"], p["augment"]) for p in {id(p): p for p in (slowest, fastest)}.values()
        ]
        for variant, use_augment in feeds:
            if variant == IN_MEMORY:
                one_batch = next(iter(build_pipeline(
                    "parallel", images, labels, normalize, True, args.batch_size
                )))
                dataset = tf.data.Dataset.from_tensors(one_batch).repeat()
            else:
                dataset = build_pipeline(
                    variant, images, labels, normalize, use_augment, args.batch_size
                )
            rate = training_rate(model, dataset, warmup, args.train_batches, args.batch_size)
            rates = across_workers(rate, f"training.{variant}.{use_augment}")
            training.append(
                {"variant": variant, "augment": use_augment, "warmup_batches": warmup, **rates}
            )
            if verbose:
                name = "model alone (in memory)" if variant == IN_MEMORY else label(
                    variant, use_augment
                )
                print(f"training {name:<22} {rates['total']:>10,.0f} images/s", flush=True)

    sharding = sharding_check(len(images))
    if verbose:
        result = {
            "workers": hvd.size(),
            "cores": os.cpu_count(),
            "intra_op_threads": int(os.environ.get("TF_NUM_INTRAOP_THREADS", "0")),
            "images": len(images),
            "images_per_worker": shard_images,
            "batch_size": args.batch_size,
            "batches": args.batches,
            "train_batches": args.train_batches,
            "decode_cost": args.decode_cost,
            "model": f"WRN-{args.depth}-{args.width}",
            "pipelines": pipelines,
            "training": training,
            "sharding": sharding,
        }
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
