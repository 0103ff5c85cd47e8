"""Realistic wrong (and unusual but right) versions of each step, as edits of the reference.

Each Case starts from a reference script (after step `base`, by default after `step`) and
replaces code in it; the replaced text must occur exactly once (or, with replace_all, at
least once), so a case that no longer fits the reference fails loudly instead of testing
nothing. Several replacements are applied in order.

A wrong case must fail check `step` with a message containing `expect_message`; a right case
must pass every check that its base script passes (and, with an `expect_message`, say it in the
message of check `step`: a note of what the grader can't tell).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    step: int
    description: str
    replace_from: str | tuple
    replace_to: str | tuple
    expect_pass: bool
    expect_message: str = ""
    base: int | None = None
    replace_all: bool = False

    @property
    def base_step(self) -> int:
        return self.step if self.base is None else self.base

    @property
    def id(self) -> str:
        verdict = "ok" if self.expect_pass else "wrong"
        return f"step{self.step:02d}-{verdict}-{self.description.replace(' ', '_')}"

    def apply(self, text: str) -> str:
        """Returns `text` with the replacements made; fails if one doesn't fit."""
        sources = (self.replace_from,) if isinstance(self.replace_from, str) else self.replace_from
        targets = (self.replace_to,) if isinstance(self.replace_to, str) else self.replace_to
        assert len(sources) == len(targets), f"{self.id}: replace_from and replace_to differ"
        for source, target in zip(sources, targets):
            found = text.count(source)
            if self.replace_all:
                assert found, f"{self.id}: {source!r} not found in the reference"
            else:
                assert found == 1, f"{self.id}: {source!r} found {found} times, expected once"
            text = text.replace(source, target)
        return text


RANK0_BLOCK = "\nif hvd.rank() == 0:\n    callbacks.append("
CHECKPOINT_APPEND = "    callbacks.append(tf.keras.callbacks.ModelCheckpoint(checkpoint_format))\n"
BOARD_APPEND = "    callbacks.append(tf.keras.callbacks.TensorBoard(args.log_dir))\n"
BROADCAST_ITEM = "    hvd.callbacks.BroadcastGlobalVariablesCallback(0),\n"
AVERAGE_ITEM = "    hvd.callbacks.MetricAverageCallback(),\n"
LIST_END = "    throughput,\n]\n"
SHARD = "train_dataset = train_dataset.shard(hvd.size(), hvd.rank())\n"
STEPS = "steps_per_epoch = steps_per_epoch // hvd.size()"
VALIDATION = "validation_steps = validation_steps // hvd.size()"
VALIDATION_SHARD = "validation_dataset = validation_dataset.shard(hvd.size(), hvd.rank())\n"
VALIDATION_CHAIN = "validation_dataset.shuffle(len(x_test)).map(normalize).batch(args.val_batch_size).repeat()"
VALIDATION_FIT = "    validation_steps=validation_steps,\n"
FIRST_STEPS = "steps_per_epoch = args.steps_per_epoch or len(x_train) // args.batch_size"
LOADED = "load_fashion_mnist(\n    args.data_dir, args.train_images, args.test_images\n)\n"
SLICED = (
    "x_train = x_train[hvd.rank() :: hvd.size()]\ny_train = y_train[hvd.rank() :: hvd.size()]\n"
)
FIND = "resume_from_epoch = restart_epoch(args.log_dir) if hvd.rank() == 0 else 0\n"
BROADCAST = 'resume_from_epoch = int(hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch"))'
LOAD_GUARD = "if resume_from_epoch > 0 and hvd.rank() == 0:"
LOAD_8 = "hvd.load_model(checkpoint_format.format(epoch=resume_from_epoch), legacy_opts=True)"
WRAP = "    opt = hvd.DistributedOptimizer(opt)\n"
COMPILE = "model.compile(optimizer=opt,"
RESUMING = "if resume_from_epoch > 0 and verbose:\n"
CREATE = "opt._create_all_weights(model.trainable_variables)"
CREATE_COMMENT = (
    "        # Horovod: rank 0's load_model made its optimizer's variables (iter, momentum) as it\n"
    "        # loaded them; a fresh optimizer makes its own in the first step, named otherwise\n"
    "        # (DistributedSGD/iter), and the broadcast, which matches names, would wait forever.\n"
    "        # Make them now under the same names, with the private method load_model calls too.\n"
)
CREATE_BLOCK = "    if resume_from_epoch > 0:\n" + CREATE_COMMENT + "        " + CREATE + "\n"
SCALED = "scaled_lr = args.base_lr * hvd.size()"
WARMUP_ARGS = "initial_lr=scaled_lr, warmup_epochs=args.warmup_epochs, verbose=verbose"
SCHEDULE_ARGS = "initial_lr=scaled_lr, start_epoch=args.warmup_epochs, multiplier=step_decay"
SCHEDULE_CALL = (
    "    hvd.callbacks.LearningRateScheduleCallback(\n        " + SCHEDULE_ARGS + "\n    ),\n"
)
# The schedules written out below are the GPU preset's (x0.1 at 15, 25, 35): right for a script
# whose CPU preset drops at the same epochs, wrong for one whose CPU preset drops at epoch 3.
CPU_DROPS = "        lr_drops=(3,),\n"
GPU_DROPS = "        lr_drops=(15, 25, 35),\n"
KERAS_SCHEDULE = (
    "    tf.keras.callbacks.LearningRateScheduler(lambda epoch: scaled_lr * step_decay(epoch)),\n"
)
KERAS_NOTE = "a Keras LearningRateScheduler sets the rate at each epoch's start"
STRETCH_NOTE = "LearningRateScheduleCallbacks: which epochs each covers"
LAMBDAS = ("lambda epoch: 1.0", "lambda epoch: 0.1", "lambda epoch: 0.01", "lambda epoch: 0.001")


def stretches(*multipliers):
    """One LearningRateScheduleCallback per stretch of the schedule (Horovod's older examples)."""
    bounds = [("args.warmup_epochs", "15"), ("15", "25"), ("25", "35"), ("35", None)]
    text = ""
    for (start, end), multiplier in zip(bounds, multipliers):
        until = f", end_epoch={end}" if end else ""
        text += (
            "    hvd.callbacks.LearningRateScheduleCallback(\n"
            f"        initial_lr=scaled_lr, start_epoch={start}{until}, multiplier={multiplier}\n"
            "    ),\n"
        )
    return text


SCHEDULE_LOOP = (
    "]\nfor start, end, m in [\n"
    "    (args.warmup_epochs, 15, 1.0), (15, 25, 0.1), (25, 35, 0.01), (35, None, 0.001)\n"
    "]:\n"
    "    callbacks.append(\n"
    "        hvd.callbacks.LearningRateScheduleCallback(\n"
    "            initial_lr=scaled_lr, start_epoch=start, end_epoch=end, multiplier=lambda epoch, m=m: m\n"
    "        )\n"
    "    )\ncallbacks += [\n"
)
TEST_RESULTS = "test_loss, test_accuracy = model.evaluate(test_dataset, verbose=0)\n"
PIN = 'tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")'

CASES = [
    # ---- step 1 -------------------------------------------------------------------------
    Case(1, "init removed", "hvd.init()\n", "\n", False, "never called"),
    Case(
        1,
        "standalone keras module",
        "import horovod.tensorflow.keras as hvd",
        "import horovod.keras as hvd",
        False,
        "standalone Keras",
    ),
    Case(
        1,
        "tensorflow module instead of keras",
        "import horovod.tensorflow.keras as hvd",
        "import horovod.tensorflow as hvd",
        False,
        "import the Keras API",
    ),
    Case(
        1,
        "init after first use",
        ("hvd.init()\n", "verbose = 1 if hvd.rank() == 0 else 0\n"),
        ("\n", "verbose = 1 if hvd.rank() == 0 else 0\nhvd.init()\n"),
        False,
        "before hvd.init()",
        base=3,
    ),
    Case(
        1,
        "no import at all",
        "import horovod.tensorflow.keras as hvd\n",
        "\n",
        False,
        "not imported",
    ),
    Case(
        1,
        "from horovod.tensorflow import keras as hvd",
        "import horovod.tensorflow.keras as hvd",
        "from horovod.tensorflow import keras as hvd",
        True,
        base=12,
    ),
    Case(
        1,
        "another alias everywhere",
        ("import horovod.tensorflow.keras as hvd", "hvd."),
        ("import horovod.tensorflow.keras as horovod_keras", "horovod_keras."),
        True,
        base=12,
        replace_all=True,
    ),
    Case(
        1,
        "no alias, full module path",
        ("import horovod.tensorflow.keras as hvd", "hvd."),
        ("import horovod.tensorflow.keras", "horovod.tensorflow.keras."),
        True,
        base=12,
        replace_all=True,
    ),
    Case(
        1,
        "init from the tensorflow module",
        ("hvd.init()", "import horovod.tensorflow.keras as hvd"),
        (
            "horovod_tf.init()",
            "import horovod.tensorflow as horovod_tf\nimport horovod.tensorflow.keras as hvd",
        ),
        True,
        base=12,
    ),
    # ---- step 2 -------------------------------------------------------------------------
    Case(2, "pinned by rank", "gpus[hvd.local_rank()]", "gpus[hvd.rank()]", False, "local_rank()"),
    Case(2, "always GPU 0", "gpus[hvd.local_rank()]", "gpus[0]", False, "GPU 0"),
    Case(
        2,
        "no device type",
        PIN,
        "tf.config.set_visible_devices(gpus[hvd.local_rank()])",
        False,
        "device type",
    ),
    Case(
        2,
        "no guard for machines without GPUs",
        "if gpus:\n    tf.config",
        "tf.config",
        False,
        "IndexError",
    ),
    Case(
        2,
        "CUDA_VISIBLE_DEVICES set too late",
        PIN,
        'os.environ["CUDA_VISIBLE_DEVICES"] = str(hvd.local_rank())',
        False,
        "CUDA_VISIBLE_DEVICES",
    ),
    Case(
        2,
        "pinned after TensorFlow started",
        ("if gpus:\n    " + PIN + "\n", "\ntrain_dataset = (\n"),
        ("\n", "\nif gpus:\n    " + PIN + "\ntrain_dataset = (\n"),
        False,
        "already running",
    ),
    Case(
        2,
        "experimental API, list, keyword",
        PIN,
        'tf.config.experimental.set_visible_devices([gpus[hvd.local_rank()]], device_type="GPU")',
        True,
    ),
    Case(
        2,
        "local rank in a variable",
        ("if gpus:\n", "gpus[hvd.local_rank()]"),
        ("local_rank = hvd.local_rank()\nif gpus:\n", "gpus[local_rank]"),
        True,
    ),
    # ---- step 3 -------------------------------------------------------------------------
    Case(
        3,
        "local rank",
        "1 if hvd.rank() == 0 else 0",
        "1 if hvd.local_rank() == 0 else 0",
        False,
        "one worker per machine",
    ),
    Case(
        3,
        "rank 1",
        "1 if hvd.rank() == 0 else 0",
        "1 if hvd.rank() == 1 else 0",
        False,
        "picks rank 1",
    ),
    Case(
        3,
        "inverted",
        "1 if hvd.rank() == 0 else 0",
        "1 if hvd.rank() else 0",
        False,
        "on every worker but rank 0",
    ),
    Case(
        3,
        "fit still verbose",
        "    verbose=verbose,\n)",
        "    verbose=1,\n)",
        False,
        "1 on every worker",
    ),
    Case(
        3,
        "not rank-dependent",
        "1 if hvd.rank() == 0 else 0",
        "1 if hvd.size() > 0 else 0",
        False,
        "does not depend",
    ),
    Case(3, "int of comparison", "1 if hvd.rank() == 0 else 0", "int(hvd.rank() == 0)", True),
    Case(
        3, "reversed comparison", "1 if hvd.rank() == 0 else 0", "1 if 0 == hvd.rank() else 0", True
    ),
    Case(3, "not rank", "1 if hvd.rank() == 0 else 0", "0 if hvd.rank() else 1", True),
    Case(3, "bool", "1 if hvd.rank() == 0 else 0", "not hvd.rank()", True, base=12),
    # ---- step 4 -------------------------------------------------------------------------
    Case(
        4,
        "wrapped but unused",
        WRAP,
        "    dist_opt = hvd.DistributedOptimizer(opt)\n",
        False,
        "unwrapped",
    ),
    Case(
        4, "result thrown away", WRAP, "    hvd.DistributedOptimizer(opt)\n", False, "thrown away"
    ),
    Case(
        4,
        "wrapped twice",
        WRAP,
        "    opt = hvd.DistributedOptimizer(hvd.DistributedOptimizer(opt))\n",
        False,
        "twice",
    ),
    Case(
        4,
        "wrapped after compile",
        (WRAP, 'metrics=["accuracy"])\n'),
        ("", 'metrics=["accuracy"])\n' + WRAP),
        False,
        "after model.compile",
    ),
    Case(
        4,
        "inline in compile",
        (WRAP, COMPILE),
        ("", "model.compile(optimizer=hvd.DistributedOptimizer(opt),"),
        True,
    ),
    Case(4, "positional optimizer", COMPILE, "model.compile(opt,", True, base=12),
    Case(
        4,
        "other name, NovoGrad",
        (WRAP, COMPILE, CREATE),
        (
            "    distributed = hvd.DistributedOptimizer(opt)\n",
            "model.compile(optimizer=distributed,",
            CREATE.replace("opt.", "distributed."),
        ),
        True,
        base=12,
    ),
    # ---- step 5 -------------------------------------------------------------------------
    Case(
        5,
        "root rank 1",
        "BroadcastGlobalVariablesCallback(0)",
        "BroadcastGlobalVariablesCallback(1)",
        False,
        "rank 1",
    ),
    Case(
        5,
        "root is the own rank",
        "BroadcastGlobalVariablesCallback(0)",
        "BroadcastGlobalVariablesCallback(hvd.rank())",
        False,
        "same on every worker",
    ),
    Case(
        5, "missing", BROADCAST_ITEM, "", False, "no hvd.callbacks.BroadcastGlobalVariablesCallback"
    ),
    Case(
        5,
        "created, not passed",
        (BROADCAST_ITEM, "callbacks = [\n"),
        ("", "broadcast = hvd.callbacks.BroadcastGlobalVariablesCallback(0)\ncallbacks = [\n"),
        False,
        "never reaches",
    ),
    Case(
        5,
        "only on rank 0",
        (BROADCAST_ITEM, RANK0_BLOCK),
        (
            "",
            "\nif hvd.rank() == 0:\n    callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))\n    callbacks.append(",
        ),
        False,
        "every worker must run it",
        base=9,
    ),
    Case(
        5,
        "keyword root_rank",
        "BroadcastGlobalVariablesCallback(0)",
        "BroadcastGlobalVariablesCallback(root_rank=0)",
        True,
        base=12,
    ),
    Case(
        5,
        "inserted later, imported by name",
        (BROADCAST_ITEM, LIST_END, "import horovod.tensorflow.keras as hvd\n"),
        (
            "",
            LIST_END + "callbacks.insert(0, BroadcastGlobalVariablesCallback(root_rank=0))\n",
            "import horovod.tensorflow.keras as hvd\n"
            "from horovod.tensorflow.keras.callbacks import BroadcastGlobalVariablesCallback\n",
        ),
        True,
        base=12,
    ),
    # ---- step 6 -------------------------------------------------------------------------
    Case(
        6,
        "shard arguments swapped",
        SHARD,
        SHARD.replace("hvd.size(), hvd.rank()", "hvd.rank(), hvd.size()"),
        False,
        "swapped",
    ),
    Case(
        6,
        "shard by local rank",
        SHARD,
        SHARD.replace("hvd.rank()", "hvd.local_rank()"),
        False,
        "local_rank() repeats",
    ),
    Case(
        6,
        "shard by local size",
        SHARD,
        SHARD.replace("hvd.size()", "hvd.local_size()"),
        False,
        "local_size()",
    ),
    Case(
        6,
        "shard thrown away",
        SHARD,
        "train_dataset.shard(hvd.size(), hvd.rank())\n",
        False,
        "thrown away",
    ),
    Case(6, "no shard", SHARD, "", False, "same images"),
    Case(
        6,
        "shard after shuffle",
        (SHARD, "train_dataset.shuffle(len(x_train))"),
        ("", "train_dataset.shuffle(len(x_train)).shard(hvd.size(), hvd.rank())"),
        False,
        "shard before shuffling",
    ),
    Case(
        6,
        "steps not divided",
        STEPS,
        "steps_per_epoch = steps_per_epoch",
        False,
        "steps_per_epoch (`steps_per_epoch`) is not divided",
    ),
    Case(
        6,
        "steps multiplied",
        STEPS,
        "steps_per_epoch = steps_per_epoch * hvd.size()",
        False,
        "multiplied",
    ),
    Case(
        6,
        "steps by local size",
        STEPS,
        "steps_per_epoch = steps_per_epoch // hvd.local_size()",
        False,
        "local_size()",
    ),
    Case(
        6,
        "divided on one path only",
        (STEPS + "\n", "steps_per_epoch = args.steps_per_epoch or len(x_train) // args.batch_size"),
        (
            "",
            "steps_per_epoch = args.steps_per_epoch or len(x_train) // args.batch_size // hvd.size()",
        ),
        False,
        "the same way on every path",
    ),
    Case(
        6,
        "sharded validation oversampled 3 times",
        VALIDATION,
        "validation_steps = 3 * validation_steps // hvd.size()",
        True,
        "3 times the validation time",
    ),
    Case(
        6,
        "validation not divided",
        VALIDATION,
        "validation_steps = validation_steps",
        False,
        "validation_steps (`validation_steps`) is not divided",
    ),
    Case(
        6,
        "validation twice per worker",
        VALIDATION,
        "validation_steps = 2 * validation_steps // hvd.size()",
        False,
        "validation_steps // hvd.size() steps",
    ),
    Case(
        6,
        "validation steps multiplied by a written-out power",
        VALIDATION,
        "validation_steps = (2 ** 70) * validation_steps // hvd.size()",
        False,
        "validation_steps // hvd.size() steps",
    ),
    Case(
        6,
        "validation steps divided by the workers squared",
        VALIDATION,
        "validation_steps = validation_steps // hvd.size() ** 2",
        False,
        "divided by hvd.size() more than once",
    ),
    Case(
        6,
        "validation steps divided by the workers to a power held in a name",
        VALIDATION,
        "exponent = 2\nvalidation_steps = validation_steps // hvd.size() ** exponent",
        False,
        "divided by hvd.size() more than once",
    ),
    Case(
        6,
        "validation steps times a number too large for a float",
        VALIDATION,
        "validation_steps = 1" + "0" * 400 + " * validation_steps // hvd.size()",
        False,
        "validation_steps // hvd.size() steps",
    ),
    Case(
        6,
        "validation steps divided by the workers to an infinite power",
        VALIDATION,
        "validation_steps = validation_steps // hvd.size() ** 1e999",
        True,  # the checker says it can't tell, and does not fail the step
        "can't tell how validation_steps",
    ),
    Case(
        6,
        "validation steps by a power of the workers the grader can't work out",
        VALIDATION,
        "validation_steps = validation_steps // hvd.size() ** epochs_exponent",
        True,  # the checker says it can't tell, and does not fail the step
        "can't tell how validation_steps",
    ),
    Case(6, "validation not sharded", VALIDATION_SHARD, "", False, "leave others out"),
    Case(
        6,
        "validation as in Horovod's older examples: 3/N random batches, not sharded",
        (VALIDATION_SHARD, VALIDATION),
        ("", "validation_steps = 3 * validation_steps // hvd.size()"),
        True,
        "Horovod's older examples",
    ),
    Case(
        6,
        "validation shard by local rank",
        VALIDATION_SHARD,
        VALIDATION_SHARD.replace("hvd.rank()", "hvd.local_rank()"),
        False,
        "local_rank()",
    ),
    Case(
        6,
        "validation sharded after the shuffle",
        (VALIDATION_SHARD, VALIDATION_CHAIN),
        ("", VALIDATION_CHAIN.replace(".map(", ".shard(hvd.size(), hvd.rank()).map(")),
        False,
        "shard before shuffling",
    ),
    Case(
        6,
        "the test images sharded, the final evaluation too",
        (VALIDATION_SHARD, "test_dataset = test_images"),
        ("", "test_images = test_images.shard(hvd.size(), hvd.rank())\ntest_dataset = test_images"),
        False,
        "final test accuracy",
    ),
    Case(
        6,
        "no validation steps with repeated validation data",
        VALIDATION_FIT,
        "",
        False,
        "never end",
    ),
    Case(
        6,
        "each worker's whole shard once, without steps",
        (VALIDATION_FIT, ".batch(args.val_batch_size).repeat()"),
        ("", ".batch(args.val_batch_size)"),
        True,
    ),
    Case(
        6,
        "images per step",
        "images_per_step = args.batch_size * hvd.size()",
        "images_per_step = args.batch_size",
        False,
        "images per step",
    ),
    Case(
        6,
        "size in a variable",
        (STEPS, VALIDATION, "images_per_step = args.batch_size * hvd.size()"),
        (
            "n_workers = hvd.size()\nsteps_per_epoch = steps_per_epoch // n_workers",
            "validation_steps = validation_steps // n_workers",
            "images_per_step = n_workers * args.batch_size",
        ),
        True,
    ),
    Case(
        6,
        "math.floor, max and int",
        ("import json\n", STEPS, VALIDATION),
        (
            "import json\nimport math\n",
            "steps_per_epoch = max(1, math.floor(steps_per_epoch / hvd.size()))",
            "validation_steps = int(validation_steps / hvd.size())",
        ),
        True,
        base=12,
    ),
    Case(
        6,
        "rank-seeded shuffle instead of shard",
        (SHARD, "train_dataset.shuffle(len(x_train))"),
        ("", "train_dataset.shuffle(len(x_train), seed=hvd.rank())"),
        True,
    ),
    Case(
        6,
        "arrays sliced by rank",
        (SHARD, LOADED, STEPS + "\n", FIRST_STEPS),
        (
            "",
            LOADED + SLICED,
            "",
            FIRST_STEPS.replace("args.steps_per_epoch or", "args.steps_per_epoch // hvd.size() or"),
        ),
        True,
    ),
    Case(
        6,
        "arrays sliced and steps divided again",
        (SHARD, LOADED),
        ("", LOADED + SLICED),
        False,
        "the same way on every path",
    ),
    Case(
        6,
        "only the images sliced",
        (SHARD, "mean, std = "),
        ("", "x_train = x_train[hvd.rank() :: hvd.size()]\nmean, std = "),
        False,
        "same images",
    ),
    Case(
        6,
        "keyword shard",
        (SHARD, VALIDATION_SHARD),
        (
            SHARD.replace("hvd.size(), hvd.rank()", "index=hvd.rank(), num_shards=hvd.size()"),
            VALIDATION_SHARD.replace("hvd.size(), hvd.rank()", "num_shards=hvd.size(), index=hvd.rank()"),
        ),
        True,
    ),
    Case(
        6,
        "augmented assignment",
        (STEPS, VALIDATION),
        (
            "steps_per_epoch //= hvd.size()",
            "validation_steps //= hvd.size()",
        ),
        True,
    ),
    # ---- step 7 -------------------------------------------------------------------------
    Case(7, "missing", AVERAGE_ITEM, "", False, "no hvd.callbacks.MetricAverageCallback"),
    Case(
        7,
        "after the checkpoint",
        (AVERAGE_ITEM, BOARD_APPEND),
        ("", BOARD_APPEND + "callbacks.append(hvd.callbacks.MetricAverageCallback())\n"),
        False,
        "ModelCheckpoint on line",
        base=9,
    ),
    Case(
        7,
        "after the warmup",
        (AVERAGE_ITEM, LIST_END),
        ("", "    hvd.callbacks.MetricAverageCallback(),\n" + LIST_END),
        False,
        "LearningRateWarmupCallback on line",
        base=11,
    ),
    Case(
        7,
        "after the Keras scheduler",
        (AVERAGE_ITEM, LIST_END),
        ("", "    hvd.callbacks.MetricAverageCallback(),\n" + LIST_END),
        False,
        "LearningRateScheduler on line",
    ),
    Case(  # independent: the broadcast acts after the first batch, the averaging at epoch ends
        7,
        "before the broadcast",
        (BROADCAST_ITEM, AVERAGE_ITEM),
        ("", AVERAGE_ITEM + BROADCAST_ITEM),
        True,
        "works the same",
    ),
    Case(
        7,
        "only on rank 0",
        (AVERAGE_ITEM, RANK0_BLOCK),
        (
            "",
            "\nif hvd.rank() == 0:\n    callbacks.insert(1, hvd.callbacks.MetricAverageCallback())\n    callbacks.append(",
        ),
        False,
        "every worker",
        base=9,
    ),
    Case(
        7,
        "inserted after the list",
        (AVERAGE_ITEM, RANK0_BLOCK),
        (
            "",
            "\ncallbacks.insert(1, hvd.callbacks.MetricAverageCallback())\nif hvd.rank() == 0:\n    callbacks.append(",
        ),
        True,
        base=12,
    ),
    Case(
        7,
        "in a variable",
        (AVERAGE_ITEM, "callbacks = [\n"),
        (
            "    average_metrics,\n",
            "average_metrics = hvd.callbacks.MetricAverageCallback()\ncallbacks = [\n",
        ),
        True,
        base=12,
    ),
    # ---- step 8 -------------------------------------------------------------------------
    Case(
        8,
        "every rank looks for checkpoints",
        FIND,
        "resume_from_epoch = restart_epoch(args.log_dir)\n",
        False,
        "restart_epoch(...) runs on every worker",
    ),
    Case(
        8,
        "broadcast from rank 1",
        BROADCAST,
        BROADCAST.replace("root_rank=0", "root_rank=1"),
        False,
        "root_rank=0",
    ),
    Case(
        8,
        "broadcast thrown away",
        BROADCAST,
        BROADCAST.replace("resume_from_epoch = int(", "int("),
        False,
        "thrown away",
    ),
    Case(
        8,
        "broadcast of the wrong value",
        BROADCAST,
        BROADCAST.replace("broadcast(resume_from_epoch,", "broadcast(args.epochs,"),
        False,
        "not the epoch",
    ),
    Case(
        8,
        "broadcast result unused",
        BROADCAST,
        BROADCAST.replace("resume_from_epoch = int(", "epoch = int("),
        False,
        "before the broadcast",
    ),
    Case(8, "no broadcast", BROADCAST + "\n", "", False, "never broadcast"),
    Case(
        8,
        "load on every rank",
        LOAD_GUARD,
        "if resume_from_epoch > 0:",
        False,
        "loading the checkpoint runs on every worker",
    ),
    Case(
        8,
        "load on local rank 0",
        LOAD_GUARD,
        "if resume_from_epoch > 0 and hvd.local_rank() == 0:",
        False,
        "one worker per machine",
    ),
    Case(
        8,
        "Keras load_model",
        LOAD_8,
        "tf.keras.models.load_model(checkpoint_format.format(epoch=resume_from_epoch))",
        False,
        "unwrapped",
    ),
    Case(
        8,
        "no legacy_opts",
        LOAD_8,
        LOAD_8.replace(", legacy_opts=True", ""),
        False,
        "legacy_opts=True",
    ),
    Case(
        8,
        "no model on the other ranks",
        "else:\n    model = MODELS[args.model](",
        "if not hvd.rank():\n    model = MODELS[args.model](",
        False,
        "only rank 0 gets a model",
    ),
    Case(
        8,
        "if-block finding",
        FIND,
        "resume_from_epoch = 0\nif hvd.rank() == 0:\n    resume_from_epoch = restart_epoch(args.log_dir)\n",
        True,
    ),
    Case(
        8,
        "if/else finding",
        FIND,
        "if hvd.rank() == 0:\n    resume_from_epoch = restart_epoch(args.log_dir)\nelse:\n    resume_from_epoch = 0\n",
        True,
        base=12,
    ),
    Case(
        8,
        "optimizer variables not created",
        CREATE_BLOCK,
        "",
        False,
        "named otherwise (DistributedSGD/iter), and the broadcast callback, which matches variables by name, waits forever",
    ),
    Case(
        8,
        "optimizer variables created on every rank",
        (CREATE_BLOCK, RESUMING),
        ("", "if resume_from_epoch > 0:\n    " + CREATE + "\n" + RESUMING),
        False,
        "also runs on rank 0 when it loads the checkpoint",
    ),
    Case(
        8,
        "optimizer variables created before the wrap",
        (CREATE_BLOCK, WRAP),
        ("", CREATE_BLOCK + WRAP),
        False,
        "hvd.DistributedOptimizer(...) wraps",
    ),
    Case(
        8,
        "model.optimizer before compile",
        (CREATE_BLOCK, WRAP),
        ("", WRAP + CREATE_BLOCK.replace("opt._create", "model.optimizer._create")),
        False,
        "None until model.compile",
    ),
    Case(
        8,
        "optimizer variables created on rank 0 only",
        CREATE_BLOCK,
        CREATE_BLOCK.replace("if resume_from_epoch > 0:", "if hvd.rank() == 0:"),
        False,
        "never runs on the workers that build a fresh model",
    ),
    Case(
        8,
        "optimizer variables when not resuming",
        CREATE_BLOCK,
        CREATE_BLOCK.replace("resume_from_epoch > 0", "resume_from_epoch == 0"),
        False,
        "never runs on the workers that build a fresh model",
    ),
    Case(
        8,
        "optimizer variables of every model variable",
        CREATE,
        CREATE.replace("trainable_variables", "weights"),
        False,
        "trainable_variables",
    ),
    Case(
        8,
        "optimizer variables on the other ranks even on a fresh run",
        CREATE_BLOCK,
        CREATE_BLOCK.replace("if resume_from_epoch > 0:", "if hvd.rank() != 0:"),
        False,
        "on a fresh run (nothing to resume) it runs on every worker but rank 0",
    ),
    Case(8, "not rank", LOAD_GUARD, "if resume_from_epoch > 0 and not hvd.rank():", True),
    Case(
        8,
        "model.optimizer and trainable_weights",
        CREATE,
        "model.optimizer._create_all_weights(model.trainable_weights)",
        True,
        base=12,
    ),
    Case(
        8,
        "optimizer variables in a separate block",
        (CREATE_BLOCK, RESUMING),
        ("", "if hvd.rank() != 0 and resume_from_epoch > 0:\n    " + CREATE + "\n" + RESUMING),
        True,
    ),
    Case(
        8,
        "model.optimizer on every rank",
        (CREATE_BLOCK, RESUMING),
        ("", CREATE.replace("opt.", "model.optimizer.") + "\n" + RESUMING),
        True,
    ),
    Case(
        8,
        "loading condition in a name",
        (LOAD_GUARD, CREATE_BLOCK),
        (
            "loading = resume_from_epoch > 0 and hvd.rank() == 0\nif loading:",
            CREATE_BLOCK.replace("if resume_from_epoch > 0:", "if resume_from_epoch:"),
        ),
        True,
        base=12,
    ),
    Case(
        8,
        "reversed comparison",
        LOAD_GUARD,
        "if 0 == hvd.rank() and resume_from_epoch > 0:",
        True,
        base=12,
    ),
    Case(
        8,
        "positional broadcast",
        BROADCAST,
        'resume_from_epoch = int(hvd.broadcast(resume_from_epoch, 0, "resume_from_epoch"))',
        True,
    ),
    # ---- step 9 -------------------------------------------------------------------------
    Case(
        9,
        "TensorBoard on every rank",
        BOARD_APPEND,
        BOARD_APPEND.lstrip(),
        False,
        "TensorBoard(...) runs on every worker",
    ),
    Case(
        9,
        "local rank",
        RANK0_BLOCK,
        RANK0_BLOCK.replace("hvd.rank()", "hvd.local_rank()"),
        False,
        "one worker per machine",
    ),
    Case(9, "inverted", RANK0_BLOCK, RANK0_BLOCK.replace("==", "!="), False, "except rank 0"),
    Case(9, "checkpoint dropped", CHECKPOINT_APPEND, "", False, "no ModelCheckpoint"),
    Case(
        9,
        "conditional list",
        (RANK0_BLOCK + "tf.keras.callbacks.ModelCheckpoint(checkpoint_format))\n" + BOARD_APPEND),
        (
            "\ncallbacks += (\n    [tf.keras.callbacks.ModelCheckpoint(checkpoint_format), "
            "tf.keras.callbacks.TensorBoard(args.log_dir)]\n    if hvd.rank() == 0\n    else []\n)\n"
        ),
        True,
        base=12,
    ),
    Case(
        9,
        "guarded by verbose",
        RANK0_BLOCK,
        RANK0_BLOCK.replace("hvd.rank() == 0", "verbose"),
        True,
        base=12,
    ),
    Case(
        9,
        "starred conditional in the list",
        (
            RANK0_BLOCK + "tf.keras.callbacks.ModelCheckpoint(checkpoint_format))\n" + BOARD_APPEND,
            LIST_END,
            "import tensorflow as tf\n",
        ),
        (
            "\n",
            "    throughput,\n    *(\n        [ModelCheckpoint(checkpoint_format), TensorBoard(args.log_dir)]\n"
            "        if hvd.rank() == 0\n        else []\n    ),\n]\n",
            "import tensorflow as tf\nfrom tensorflow.keras.callbacks import ModelCheckpoint, TensorBoard\n",
        ),
        True,
        base=12,
    ),
    # ---- step 10 ------------------------------------------------------------------------
    Case(10, "not scaled", SCALED, "scaled_lr = args.base_lr", False, "not scaled"),
    Case(
        10,
        "local size",
        SCALED,
        "scaled_lr = args.base_lr * hvd.local_size()",
        False,
        "local_size()",
    ),
    Case(10, "rank", SCALED, "scaled_lr = args.base_lr * hvd.rank()", False, "rank"),
    Case(10, "divided", SCALED, "scaled_lr = args.base_lr / hvd.size()", False, "divided"),
    Case(
        10,
        "square root",
        (SCALED, "import json\n"),
        ("scaled_lr = args.base_lr * math.sqrt(hvd.size())", "import json\nimport math\n"),
        False,
        "square root",
    ),
    Case(
        10,
        "optimizer gets the base rate",
        "SGD(learning_rate=scaled_lr,",
        "SGD(learning_rate=args.base_lr,",
        False,
        "not scaled",
    ),
    Case(
        10,
        "NovoGrad gets the base rate",
        "NovoGrad(learning_rate=scaled_lr,",
        "NovoGrad(learning_rate=args.base_lr,",
        False,
        "not scaled",
        base=12,
    ),
    Case(
        10,
        "scheduler uses the base rate",
        "lambda epoch: scaled_lr * step_decay(epoch)",
        "lambda epoch: args.base_lr * step_decay(epoch)",
        False,
        "LearningRateScheduler",
    ),
    Case(10, "size first", SCALED, "scaled_lr = hvd.size() * args.base_lr", True, base=12),
    Case(10, "lr keyword", "SGD(learning_rate=scaled_lr,", "SGD(lr=scaled_lr,", True),
    Case(
        10,
        "size in a variable",
        SCALED,
        "workers = hvd.size()\nscaled_lr = args.base_lr * workers",
        True,
    ),
    # ---- step 11 ------------------------------------------------------------------------
    # The reading recognises the lesson's form and the wrong forms it can be sure of; whatever
    # it would have to work out (a Keras schedule, several schedule callbacks, a lambda, a
    # function other than step_decay) is "can't tell", right or wrong: a run shows the rates.
    Case(
        11,
        "Keras scheduler kept beside Horovod's",
        LIST_END,
        "    tf.keras.callbacks.LearningRateScheduler(lambda epoch: scaled_lr),\n" + LIST_END,
        True,
        KERAS_NOTE,
    ),
    Case(
        11,
        "Keras scheduler instead of Horovod's",
        SCHEDULE_CALL,
        KERAS_SCHEDULE,
        True,
        KERAS_NOTE,
    ),
    Case(
        11,
        "Keras scheduler before the warmup, a def",
        (SCHEDULE_CALL, "    hvd.callbacks.LearningRateWarmupCallback(", "callbacks = [\n"),
        (
            "",
            "    tf.keras.callbacks.LearningRateScheduler(keras_rate),\n"
            "    hvd.callbacks.LearningRateWarmupCallback(",
            "def keras_rate(epoch):\n    return args.base_lr * hvd.size() * step_decay(epoch)\n"
            "\n\ncallbacks = [\n",
        ),
        True,
        KERAS_NOTE,
    ),
    Case(
        11,
        "Keras scheduler with a warmup past the drop",
        (SCHEDULE_CALL, "        warmup_epochs=1,\n"),
        (KERAS_SCHEDULE, "        warmup_epochs=4,\n"),
        True,  # wrong (the momentum jumps at the drop inside the warmup): a run shows it
        KERAS_NOTE,
    ),
    Case(
        11,
        "Keras scheduler without the drops",
        SCHEDULE_CALL,
        "    tf.keras.callbacks.LearningRateScheduler(lambda epoch: scaled_lr),\n",
        True,  # wrong (no drop): a run shows it
        KERAS_NOTE,
    ),
    Case(
        11,
        "Keras scheduler gives the multiplier alone",
        SCHEDULE_CALL,
        "    tf.keras.callbacks.LearningRateScheduler(step_decay),\n",
        False,
        "step_decay(epoch) itself, 1 and then 0.1, not a multiple of the scaled rate scaled_lr",
    ),
    Case(
        11,
        "Keras scheduler on rank 0 only",
        (SCHEDULE_CALL, RANK0_BLOCK),
        (
            "",
            RANK0_BLOCK.replace(
                "callbacks.append(",
                "callbacks.append(" + KERAS_SCHEDULE.strip()[:-1] + ")\n    callbacks.append(",
            ),
        ),
        False,
        "every worker",
    ),
    Case(
        11,
        "schedule from epoch 0",
        SCHEDULE_ARGS,
        SCHEDULE_ARGS.replace("start_epoch=args.warmup_epochs", "start_epoch=0"),
        False,
        "during the warmup",
    ),
    Case(
        11,
        "schedule without start",
        SCHEDULE_ARGS,
        SCHEDULE_ARGS.replace(" start_epoch=args.warmup_epochs,", ""),
        False,
        "during the warmup",
    ),
    Case(
        11,
        "warmup from the base rate",
        WARMUP_ARGS,
        WARMUP_ARGS.replace("initial_lr=scaled_lr", "initial_lr=args.base_lr"),
        False,
        "initial_lr",
    ),
    Case(
        11,
        "default warmup length",
        WARMUP_ARGS,
        "initial_lr=scaled_lr, verbose=verbose",
        False,
        "pass warmup_epochs",
    ),
    Case(11, "preset without warmup", "        warmup_epochs=1,\n", "", False, "KeyError"),
    Case(11, "no option", '"--warmup-epochs",', '"--warmup",', False, "--warmup-epochs option"),
    Case(
        11,
        "constant multipliers as in Horovod's older examples",
        SCHEDULE_CALL,
        stretches("1.0", "1e-1", "1e-2", "1e-3"),
        False,
        "m ** (epoch - start_epoch)",
    ),
    Case(
        11,
        "a constant multiplier for one stretch",
        SCHEDULE_CALL,
        stretches(*LAMBDAS[:2], "0.01", LAMBDAS[3]),
        False,
        "sets scaled_lr x 1 at 25, x 0.01 at 26, x 0.0001 at 27",
    ),
    Case(
        11,
        "schedules overlap",
        SCHEDULE_CALL,
        stretches(*LAMBDAS).replace("start_epoch=15, end_epoch=25", "start_epoch=10, end_epoch=25"),
        True,  # wrong (two set the rate at epochs 10-14): a run shows it
        STRETCH_NOTE,
    ),
    Case(
        11,
        "last stretch missing",
        SCHEDULE_CALL,
        stretches(*LAMBDAS[:3]),
        True,  # wrong (x0.01 from epoch 35 on): a run shows it
        STRETCH_NOTE,
    ),
    Case(
        11,
        "a tenfold drop too many",
        SCHEDULE_CALL,
        stretches("lambda epoch: 1.0", "lambda epoch: 0.1", "lambda epoch: 0.001", LAMBDAS[3]),
        True,  # wrong: a run shows it
        STRETCH_NOTE,
    ),
    Case(
        11,
        "lambdas in a loop read the last multiplier",
        SCHEDULE_CALL,
        SCHEDULE_LOOP.replace(", m=m", ""),
        True,  # wrong (every lambda returns the last m, 0.001): a run shows it
        STRETCH_NOTE,
    ),
    Case(
        11,
        "warmup on rank 0 only",
        (
            "    hvd.callbacks.LearningRateWarmupCallback(\n        " + WARMUP_ARGS + "\n    ),\n",
            RANK0_BLOCK,
        ),
        (
            "",
            "\nif hvd.rank() == 0:\n    callbacks.insert(2, hvd.callbacks.LearningRateWarmupCallback("
            + WARMUP_ARGS
            + "))\n    callbacks.append(",
        ),
        False,
        "every worker",
    ),
    Case(
        11, "positional warmup", WARMUP_ARGS, "scaled_lr, args.warmup_epochs, verbose=verbose", True
    ),
    Case(
        11,
        "warmup length in a variable",
        ("callbacks = [\n", WARMUP_ARGS, SCHEDULE_ARGS),
        (
            "warmup = args.warmup_epochs\ncallbacks = [\n",
            "verbose=verbose, warmup_epochs=warmup, initial_lr=scaled_lr",
            "multiplier=step_decay, start_epoch=warmup, initial_lr=scaled_lr",
        ),
        True,
        base=12,
    ),
    Case(
        11,
        "one callback per stretch, lambdas",
        (SCHEDULE_CALL, CPU_DROPS),
        (stretches(*LAMBDAS), GPU_DROPS),
        True,
        STRETCH_NOTE,
        base=12,
    ),
    Case(
        11,
        "the GPU preset's stretches in a CPU run",
        SCHEDULE_CALL,
        stretches(*LAMBDAS),
        True,  # wrong (the CPU preset drops at epoch 3): a run shows it
        STRETCH_NOTE,
    ),
    Case(
        11,
        "an older starting script: step_decay's own epochs, no lr_drops",
        (
            CPU_DROPS,
            GPU_DROPS,
            "for drop in args.lr_drops)",
            '    parser.add_argument(\n        "--lr-drops",\n',
        ),
        (
            "",
            "",
            "for drop in (15, 25, 35))",
            '    parser.add_argument(\n        "--unused-option",\n',
        ),
        True,
        "what `step_decay` returns at each epoch",
        base=12,
    ),
    Case(
        11,
        "stretches built in a loop",
        (SCHEDULE_CALL, CPU_DROPS),
        (SCHEDULE_LOOP, GPU_DROPS),
        True,
        STRETCH_NOTE,
        base=12,
    ),
    Case(
        11,
        "stretches from a comprehension",
        (SCHEDULE_CALL, CPU_DROPS),
        (
            "    *[\n"
        "        hvd.callbacks.LearningRateScheduleCallback(\n"
        "            initial_lr=scaled_lr, start_epoch=start, end_epoch=end,\n"
        "            multiplier=lambda epoch, m=m: m,\n"
        "        )\n"
        "        for start, end, m in [\n"
        "            (args.warmup_epochs, 15, 1.0), (15, 25, 0.1), (25, 35, 0.01), (35, None, 0.001)\n"
            "        ]\n"
            "    ],\n",
            GPU_DROPS,
        ),
        True,
        STRETCH_NOTE,
        base=12,
    ),
    Case(
        11,
        "own multiplier function with ifs",
        (SCHEDULE_ARGS, "\nclass Throughput(", CPU_DROPS),
        (
            SCHEDULE_ARGS.replace("step_decay", "lr_multiplier"),
            "\ndef lr_multiplier(epoch):\n"
            "    if epoch < 15:\n        return 1.0\n"
            "    elif epoch < 25:\n        return 0.1\n"
            "    factor = 0.01\n"
            "    if epoch >= 35:\n        factor /= 10\n"
            "    return factor\n\n\nclass Throughput(",
            GPU_DROPS,
        ),
        True,
        "what `lr_multiplier` returns at each epoch",
        base=12,
    ),
    Case(
        11,
        "a Keras schedule object the grader can't evaluate",
        "multiplier=step_decay",
        "multiplier=tf.keras.optimizers.schedules.PiecewiseConstantDecay(\n"
        "            [14, 24, 34], [1.0, 0.1, 0.01, 0.001]\n        )",
        True,
        "can't tell",
        base=12,
    ),
    Case(
        11,
        "multiplier called instead of passed",
        "multiplier=step_decay",
        "multiplier=step_decay(args.warmup_epochs)",
        False,
        "calls step_decay once, here, and passes its result",
    ),
    Case(
        11,
        "a number as the only multiplier",
        "multiplier=step_decay",
        "multiplier=0.1",
        False,
        "m ** (epoch - start_epoch), not a constant factor",
    ),
    Case(11, "a lambda that calls step_decay", "multiplier=step_decay",
         "multiplier=lambda epoch: step_decay(epoch)", True),  # fmt: skip
    Case(
        11,
        "step_decay renamed, its parameter too",
        ("def step_decay(epoch):", "epoch >= drop for", "multiplier=step_decay"),
        ("def decay(e):", "e >= drop for", "multiplier=decay"),
        True,
    ),
    Case(
        11,
        "a lambda of its own",
        "multiplier=step_decay",
        "multiplier=lambda epoch: 0.1 ** sum(epoch > drop for drop in args.lr_drops)",
        True,  # wrong (one epoch late): a run shows it
        "what the lambda returns at each epoch",
    ),
    Case(
        11,
        "a warmup callback of its own",
        (
            "    hvd.callbacks.LearningRateWarmupCallback(\n        " + WARMUP_ARGS + "\n    ),\n",
            "\nclass Throughput(",
        ),
        (
            "    OwnWarmup(),\n",
            "\nclass OwnWarmup(tf.keras.callbacks.Callback):\n"
            "    def on_train_batch_begin(self, batch, logs=None):\n"
            "        tf.keras.backend.set_value(self.model.optimizer.lr, scaled_lr)\n"
            "\n\nclass Throughput(",
        ),
        True,
        "may set the learning rate at each batch",
    ),
    Case(
        11,
        "no warmup at all",
        "    hvd.callbacks.LearningRateWarmupCallback(\n        " + WARMUP_ARGS + "\n    ),\n",
        "",
        False,
        "no hvd.callbacks.LearningRateWarmupCallback",
    ),
    # ---- step 12 ------------------------------------------------------------------------
    Case(
        12,
        "load without NovoGrad",
        "        custom_optimizers=[tfa.optimizers.NovoGrad],\n",
        "",
        False,
        "custom_optimizers",
    ),
    Case(
        12,
        "another optimizer",
        "tfa.optimizers.NovoGrad(learning_rate=",
        "tfa.optimizers.LAMB(learning_rate=",
        False,
        "not NovoGrad",
    ),
    Case(
        12,
        "NovoGrad not imported",
        "opt = tfa.optimizers.NovoGrad(",
        "opt = NovoGrad(",
        False,
        "not TensorFlow Addons",
    ),
    Case(
        12,
        "imported by name",
        ("import tensorflow_addons as tfa", "tfa.optimizers.NovoGrad"),
        ("from tensorflow_addons.optimizers import NovoGrad", "NovoGrad"),
        True,
        replace_all=True,
    ),
    Case(
        12,
        "another alias",
        ("import tensorflow_addons as tfa", "tfa.optimizers"),
        ("import tensorflow_addons as addons", "addons.optimizers"),
        True,
        replace_all=True,
    ),
    # ---- every worker reaches each collective and Horovod wrapper ------------------------
    Case(
        8,
        "broadcast on rank 0 only",
        BROADCAST,
        "if hvd.rank() == 0:\n    " + BROADCAST,
        False,
        "hvd.broadcast(...) runs only when `hvd.rank() == 0` is true, which depends on the worker's rank",
    ),
    Case(
        8,
        "broadcast only when rank 0 found a checkpoint",
        BROADCAST,
        "if resume_from_epoch > 0:\n    " + BROADCAST,
        False,
        "`resume_from_epoch > 0` is true, which depends on the worker's rank",
    ),
    Case(
        8,
        "broadcast only when the log directory exists",
        BROADCAST,
        "if os.path.exists(args.log_dir):\n    " + BROADCAST,
        False,
        "each worker works that out for itself (`os.path.exists(args.log_dir)`",
    ),
    Case(
        8,
        "broadcast in the else of a rank test",
        (BROADCAST + "\n", FIND),
        (
            "",
            "if hvd.rank() == 0:\n    resume_from_epoch = restart_epoch(args.log_dir)\n"
            "else:\n    resume_from_epoch = 0\n    " + BROADCAST + "\n",
        ),
        False,
        "`hvd.rank() == 0` is false, which depends on the worker's rank",
    ),
    Case(
        7,
        "test accuracy averaged on rank 0 only",
        TEST_RESULTS,
        TEST_RESULTS + "if verbose:\n    test_accuracy = float(hvd.allreduce(test_accuracy))\n",
        False,
        "hvd.allreduce(...) runs only when `verbose` is true, which depends on the worker's rank",
    ),
    Case(
        7,
        "test accuracy averaged on every worker",
        TEST_RESULTS,
        TEST_RESULTS + "test_accuracy = float(hvd.allreduce(test_accuracy))\n",
        True,
        base=12,
    ),
    Case(
        4,
        "optimizer wrapped on rank 0 only",
        WRAP,
        "    if hvd.rank() == 0:\n        opt = hvd.DistributedOptimizer(opt)\n",
        False,
        "hvd.DistributedOptimizer(...) never runs on the other workers when resuming",
        base=12,
    ),
    Case(
        4,
        "training on rank 0 only",
        "start = time.perf_counter()\nmodel.fit(",
        "start = time.perf_counter()\nif hvd.rank() == 0:\n  model.fit(",
        False,
        "model.fit(...) runs only when `hvd.rank() == 0` is true",
    ),
    Case(
        5,
        "broadcast callback only when no checkpoint is found on disk",
        (BROADCAST_ITEM, LIST_END),
        (
            "",
            LIST_END + "if not os.path.exists(checkpoint_format.format(epoch=1)):\n"
            "    callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))\n",
        ),
        False,
        "each worker works that out for itself",
    ),
    Case(
        7,
        "metric averaging under a helper's rank test",
        (AVERAGE_ITEM, LIST_END, "hvd.init()\n"),
        (
            "",
            LIST_END
            + "if is_root():\n    callbacks.insert(1, hvd.callbacks.MetricAverageCallback())\n",
            "hvd.init()\n\n\ndef is_root():\n    return hvd.rank() == 0\n\n",
        ),
        False,
        "only added when `is_root()` (that is, hvd.rank() == 0)",
    ),
    Case(
        11,
        "schedule on rank 0 only, through verbose",
        (SCHEDULE_CALL, LIST_END),
        (
            "",
            LIST_END
            + "if verbose:\n    callbacks.append(hvd.callbacks.LearningRateScheduleCallback("
            + SCHEDULE_ARGS
            + "))\n",
        ),
        False,
        "only added when `verbose` (that is, hvd.rank() == 0)",
    ),
    # ---- guards are judged by what they test ----------------------------------------------
    Case(
        2,
        "GPU pinned on rank 0 only",
        "if gpus:\n    tf.config",
        "if hvd.rank() == 0:\n    tf.config",
        False,
        "a test of the worker's rank, not of the GPU list",
    ),
    Case(
        2,
        "GPU pinned if there are GPUs, on rank 0",
        "if gpus:\n    tf.config",
        "if gpus and hvd.rank() == 0:\n    tf.config",
        False,
        "a test of the worker's rank",
    ),
    Case(
        2,
        "guard compares the local rank with the GPU count",
        "if gpus:\n    tf.config",
        "if hvd.local_rank() < len(gpus):\n    tf.config",
        True,
        base=12,
    ),
    Case(
        2,
        "guard lists the GPUs again",
        "if gpus:\n    tf.config",
        'if tf.config.list_physical_devices("GPU"):\n    tf.config',
        True,
        base=12,
    ),
    Case(
        2,
        "try instead of a guard",
        "if gpus:\n    " + PIN + "\n",
        "try:\n    " + PIN + "\nexcept IndexError:\n    pass  # no GPU on this machine\n",
        True,
        base=12,
    ),
    Case(
        2,
        "guard the grader can't read",
        "if gpus:\n    tf.config",
        'if os.environ.get("WORKBOOK_GPUS", "1") != "0":\n    tf.config',
        True,
        "can't tell whether",
        base=12,
    ),
    Case(
        9,
        "writers guarded by verbose > 0",
        RANK0_BLOCK,
        RANK0_BLOCK.replace("hvd.rank() == 0", "verbose > 0"),
        True,
        base=12,
    ),
    Case(
        9,
        "writers guarded by the number of workers",
        RANK0_BLOCK,
        RANK0_BLOCK.replace("hvd.rank() == 0", "hvd.size() >= 1"),
        False,
        "ModelCheckpoint(...) runs on every worker",
    ),
    Case(
        3,
        "results printed when verbose > 0",
        "if verbose:\n    report",
        "if verbose > 0:\n    report",
        True,
        base=12,
    ),
    # ---- Horovod functions named but not called --------------------------------------------
    Case(
        1,
        "init not called",
        "hvd.init()\n",
        "hvd.init\n",
        False,
        "hvd.init is a function: call it, hvd.init()",
    ),
    Case(
        2,
        "local rank not called",
        "gpus[hvd.local_rank()]",
        "gpus[hvd.local_rank]",
        False,
        "hvd.local_rank is a function: call it, hvd.local_rank()",
    ),
    Case(
        3,
        "rank not called",
        "1 if hvd.rank() == 0 else 0",
        "1 if hvd.rank == 0 else 0",
        False,
        "hvd.rank is a function: call it, hvd.rank()",
    ),
    Case(
        6,
        "size not called in the steps",
        STEPS,
        "steps_per_epoch = steps_per_epoch // hvd.size",
        False,
        "hvd.size is a function: call it, hvd.size()",
    ),
    Case(
        6,
        "rank not called in the shard",
        SHARD,
        SHARD.replace("hvd.rank()", "hvd.rank"),
        False,
        "hvd.rank is a function: call it, hvd.rank()",
    ),
    Case(
        9,
        "rank not called in the writers' guard",
        RANK0_BLOCK,
        RANK0_BLOCK.replace("hvd.rank() == 0", "hvd.rank == 0"),
        False,
        "hvd.rank is a function: call it, hvd.rank()",
    ),
    Case(
        10,
        "size not called",
        SCALED,
        "scaled_lr = args.base_lr * hvd.size",
        False,
        "hvd.size is a function: call it, hvd.size()",
    ),
    # ---- code the grader follows: helpers, loops, in-place updates -------------------------
    Case(
        8,
        "rank test in a helper function, everywhere",
        ("hvd.rank() == 0", "hvd.init()\n"),
        ("is_root()", "hvd.init()\n\n\ndef is_root():\n    return hvd.rank() == 0\n\n"),
        True,
        base=12,
        replace_all=True,
    ),
    Case(
        6,
        "number of workers from a helper function",
        ("hvd.size()", "hvd.init()\n"),
        ("workers()", "hvd.init()\n\n\ndef workers():\n    return hvd.size()\n\n"),
        True,
        base=12,
        replace_all=True,
    ),
    Case(
        6,
        "steps divided by a helper with a parameter",
        (STEPS, VALIDATION, "hvd.init()\n"),
        (
            "steps_per_epoch = per_worker(steps_per_epoch)",
            "validation_steps = per_worker(validation_steps)",
            "hvd.init()\n\n\ndef per_worker(count):\n    return count // hvd.size()\n\n",
        ),
        True,
        base=12,
    ),
    Case(
        6,
        "steps from a straight-line helper",
        (STEPS, "hvd.init()\n"),
        (
            "steps_per_epoch = per_worker(steps_per_epoch)",
            "hvd.init()\n\n\ndef per_worker(count):\n    share = count // hvd.size()\n"
            "    return max(share, 1)\n\n",
        ),
        True,
        base=12,
    ),
    Case(
        6,
        "steps from a helper the grader can't follow",
        (STEPS, "hvd.init()\n"),
        (
            "steps_per_epoch = per_worker(steps_per_epoch)",
            "hvd.init()\n\n\ndef per_worker(count):\n    if count > 0:\n"
            "        return count // hvd.size()\n    return 1\n\n",
        ),
        True,
        "can't tell how steps_per_epoch (`steps_per_epoch`) changes",
        base=12,
    ),
    Case(
        10,
        "rate scaled by a helper with a parameter",
        (SCALED, "hvd.init()\n"),
        (
            "scaled_lr = scaled(args.base_lr)",
            "hvd.init()\n\n\ndef scaled(rate):\n    return rate * hvd.size()\n\n",
        ),
        True,
        base=12,
    ),
    Case(
        4,
        "optimizer made by a helper",
        (
            "opt = tfa.optimizers.NovoGrad(learning_rate=scaled_lr, beta_1=0.9, beta_2=0.98)",
            WRAP,
            "hvd.init()\n",
        ),
        (
            "opt = distributed_novograd(scaled_lr)",
            "",
            "hvd.init()\n\n\ndef distributed_novograd(rate):\n    return hvd.DistributedOptimizer("
            "tfa.optimizers.NovoGrad(learning_rate=rate, beta_1=0.9, beta_2=0.98))\n\n",
        ),
        True,
        base=12,
    ),
    Case(
        4,
        "optimizer made and wrapped in a straight-line helper",
        (
            "opt = tf.keras.optimizers.legacy.SGD(learning_rate=scaled_lr, momentum=args.momentum)",
            WRAP,
            "hvd.init()\n",
        ),
        (
            "opt = make_optimizer(scaled_lr)",
            "",
            "hvd.init()\n\n\ndef make_optimizer(rate):\n"
            "    opt = tf.keras.optimizers.legacy.SGD(learning_rate=rate, momentum=args.momentum)\n"
            "    return hvd.DistributedOptimizer(opt)\n\n",
        ),
        True,
        base=11,
    ),
    Case(
        4,
        "optimizer from a helper the grader can't follow",
        (
            "opt = tf.keras.optimizers.legacy.SGD(learning_rate=scaled_lr, momentum=args.momentum)",
            WRAP,
            "hvd.init()\n",
        ),
        (
            "opt = make_optimizer(scaled_lr)",
            "",
            "hvd.init()\n\n\ndef make_optimizer(rate):\n"
            "    if rate > 1:\n        rate = 1\n"
            "    opt = tf.keras.optimizers.legacy.SGD(learning_rate=rate, momentum=args.momentum)\n"
            "    return hvd.DistributedOptimizer(opt)\n\n",
        ),
        True,
        "can't tell what optimizer `opt` is",
        base=11,
    ),
    Case(
        10,
        "base rate scaled in place",
        (SCALED, "scaled_lr"),
        ("args.base_lr *= hvd.size()", "args.base_lr"),
        True,
        base=12,
        replace_all=True,
    ),
    Case(
        10,
        "base rate reassigned",
        SCALED,
        "args.base_lr = args.base_lr * hvd.size()\nscaled_lr = args.base_lr",
        True,
        base=12,
    ),
    Case(
        10,
        "base rate scaled in place twice",
        SCALED,
        "args.base_lr *= hvd.size()\nargs.base_lr *= hvd.size()\nscaled_lr = args.base_lr",
        False,
        "multiplied by hvd.size() more than once",
    ),
    # ---- hvd.load_model gets what Horovod 0.28.1 needs -------------------------------------
    Case(
        12,
        "NovoGrad in custom_objects",
        "custom_optimizers=[tfa.optimizers.NovoGrad]",
        'custom_objects={"NovoGrad": tfa.optimizers.NovoGrad}',
        False,
        "custom_objects hands NovoGrad to Keras as it is",
    ),
    Case(
        12,
        "custom_optimizers without a list",
        "custom_optimizers=[tfa.optimizers.NovoGrad]",
        "custom_optimizers=tfa.optimizers.NovoGrad",
        False,
        "custom_optimizers takes a list",
    ),
    Case(12, "NovoGrad without legacy_opts", "        legacy_opts=True,\n", "", True),
    Case(
        8,
        "legacy_opts with a new Keras optimizer",
        "tf.keras.optimizers.legacy.SGD(",
        "tf.keras.optimizers.SGD(",
        False,
        "drop legacy_opts=True",
    ),
    # ---- the general classes of issue 21: another route that works, a wrong one that hid --
    Case(
        12,
        "NovoGrad made and wrapped in a helper function",
        (
            "    opt = tfa.optimizers.NovoGrad(learning_rate=scaled_lr, beta_1=0.9, beta_2=0.98)\n"
            "    # Horovod: wrap the optimizer so that every step averages the gradients of all workers.\n"
            "    opt = hvd.DistributedOptimizer(opt)\n",
            "\n\ndef step_decay(",
        ),
        (
            "    opt = make_optimizer(scaled_lr)\n",
            "\n\ndef make_optimizer(rate):\n"
            "    novograd = tfa.optimizers.NovoGrad(learning_rate=rate, beta_1=0.9, beta_2=0.98)\n"
            "    return hvd.DistributedOptimizer(novograd)\n\n\ndef step_decay(",
        ),
        True,
    ),
    Case(
        3,
        "other ranks get verbosity 2",
        "verbose = 1 if hvd.rank() == 0 else 0",
        "verbose = 1 if hvd.rank() == 0 else 2",
        False,
        "is 2 on every worker but rank 0",
    ),
    Case(
        3,
        "rank 0 gets verbosity 2, the others 0",
        "verbose = 1 if hvd.rank() == 0 else 0",
        "verbose = 2 if hvd.rank() == 0 else 0",
        True,
    ),
    Case(
        5,
        "initial weights broadcast only when resuming",
        (
            "    hvd.callbacks.BroadcastGlobalVariablesCallback(0),\n",
            "if hvd.rank() == 0:\n    callbacks.append(tf.keras.callbacks.ModelCheckpoint",
        ),
        (
            "",
            "if resume_from_epoch > 0:\n"
            "    callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))\n"
            "if hvd.rank() == 0:\n    callbacks.append(tf.keras.callbacks.ModelCheckpoint",
        ),
        False,
        "only added when `resume_from_epoch > 0`",
        base=12,
    ),
    Case(
        5,
        "broadcast only with more than one worker",
        (
            "    hvd.callbacks.BroadcastGlobalVariablesCallback(0),\n",
            "if hvd.rank() == 0:\n    callbacks.append(tf.keras.callbacks.ModelCheckpoint",
        ),
        (
            "",
            "if hvd.size() > 1:\n"
            "    callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))\n"
            "if hvd.rank() == 0:\n    callbacks.append(tf.keras.callbacks.ModelCheckpoint",
        ),
        True,
        base=12,
    ),
    # ---- followed through the script's own code (issue 28: no false verdicts) -----------
    Case(
        1,
        "init only if not initialized yet",
        "hvd.init()\n",
        "if not hvd.is_initialized():\n    hvd.init()\n",
        True,
        base=12,
    ),
    Case(
        1,
        "init in a set-up function the script calls",
        "hvd.init()\n",
        "def setup():\n    hvd.init()\n\n\nsetup()\n",
        True,
        base=12,
    ),
    Case(
        1,
        "set-up function with init called after a Horovod call",
        ("hvd.init()\n", "verbose = 1 if hvd.rank() == 0 else 0\n"),
        (
            "def setup():\n    hvd.init()\n\n\n",
            "verbose = 1 if hvd.rank() == 0 else 0\nsetup()\n",
        ),
        False,
        "before hvd.init() (line",
        base=12,
    ),
    Case(
        2,
        "pinned in a helper the script calls",
        'gpus = tf.config.list_physical_devices("GPU")\nfor gpu in gpus:\n'
        "    tf.config.experimental.set_memory_growth(gpu, True)\nif gpus:\n    " + PIN + "\n",
        'def pin_gpu():\n    gpus = tf.config.list_physical_devices("GPU")\n    for gpu in gpus:\n'
        "        tf.config.experimental.set_memory_growth(gpu, True)\n    if gpus:\n        "
        + PIN + "\n\n\npin_gpu()\n",
        True,
        base=12,
    ),
    Case(
        2,
        "helper pins by rank",
        'gpus = tf.config.list_physical_devices("GPU")\nfor gpu in gpus:\n'
        "    tf.config.experimental.set_memory_growth(gpu, True)\nif gpus:\n    " + PIN + "\n",
        'def pin_gpu(gpus):\n    if not gpus:\n        return\n'
        '    tf.config.set_visible_devices(gpus[hvd.rank()], "GPU")\n\n\n'
        'pin_gpu(tf.config.list_physical_devices("GPU"))\n',
        False,
        "index by hvd.local_rank()",
        base=12,
    ),
    Case(
        3,
        "verbose 1, then 0 on the other ranks",
        "verbose = 1 if hvd.rank() == 0 else 0\n",
        "verbose = 1\nif hvd.rank() != 0:\n    verbose = 0\n",
        True,
        base=12,
    ),
    Case(
        3,
        "verbose 1, then 0 on rank 0",
        "verbose = 1 if hvd.rank() == 0 else 0\n",
        "verbose = 1\nif hvd.rank() == 0:\n    verbose = 0\n",
        False,
        "is 1 on every worker but rank 0",
        base=12,
    ),
    Case(
        3,
        "throughput left at its default verbosity",
        "Throughput(images_per_step, verbose=verbose)",
        "Throughput(images_per_step)",
        False,
        "gets no verbose, so it takes its default, 1",
        base=12,
    ),
    Case(
        4,
        "optimizer wrapped only on one worker",
        WRAP,
        "    if hvd.size() == 1:\n        opt = hvd.DistributedOptimizer(opt)\n",
        False,
        "model.compile gets the plain optimizer",
        base=12,
    ),
    Case(
        4,
        "optimizer wrapped only with more than one worker",
        WRAP,
        "    if hvd.size() > 1:\n        opt = hvd.DistributedOptimizer(opt)\n",
        True,
        base=12,
    ),
    Case(
        6,
        "sharded in a helper that returns the dataset",
        "train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))\n"
        "# Horovod: give each worker its own 1/N of the images, so that no two workers train on "
        "one batch.\n" + SHARD,
        "def sharded(x, y):\n    dataset = tf.data.Dataset.from_tensor_slices((x, y))\n"
        "    return dataset.shard(hvd.size(), hvd.rank())\n\n\n"
        "train_dataset = sharded(x_train, y_train)\n",
        True,
        base=12,
    ),
    Case(
        6,
        "sharded in a helper with a branch",
        "train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))\n"
        "# Horovod: give each worker its own 1/N of the images, so that no two workers train on "
        "one batch.\n" + SHARD,
        "def sharded(x, y, shard=True):\n    dataset = tf.data.Dataset.from_tensor_slices((x, y))\n"
        "    if shard:\n        dataset = dataset.shard(hvd.size(), hvd.rank())\n"
        "    return dataset\n\n\ntrain_dataset = sharded(x_train, y_train)\n",
        True,
        "which the grader did not follow",
        base=12,
    ),
    Case(
        6,
        "helper that does not shard",
        "train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))\n"
        "# Horovod: give each worker its own 1/N of the images, so that no two workers train on "
        "one batch.\n" + SHARD,
        "def sharded(x, y):\n    dataset = tf.data.Dataset.from_tensor_slices((x, y))\n"
        "    return dataset.shuffle(len(x))\n\n\ntrain_dataset = sharded(x_train, y_train)\n",
        False,
        "every worker trains on the same images",
        base=12,
    ),
    Case(
        8,
        "restart_epoch in a helper with an early return",
        FIND,
        "def find_epoch():\n    if hvd.rank() != 0:\n        return 0\n"
        "    return restart_epoch(args.log_dir)\n\n\nresume_from_epoch = find_epoch()\n",
        True,
        base=12,
    ),
    Case(
        8,
        "restart_epoch in a helper on every worker",
        FIND,
        "def find_epoch():\n    return restart_epoch(args.log_dir)\n\n\n"
        "resume_from_epoch = find_epoch()\n",
        False,
        "restart_epoch(...) runs on every worker",
        base=12,
    ),
    Case(
        10,
        "rate scaled by batch size times workers over 256",
        SCALED,
        "scaled_lr = args.base_lr * args.batch_size * hvd.size() / 256",
        False,
        "multiplies hvd.size() by `args.base_lr`, `args.batch_size`",
        base=12,
    ),
    Case(
        10,
        "base rate in a variable, then scaled",
        SCALED,
        "base_lr = args.base_lr\nscaled_lr = hvd.size() * base_lr",
        True,
        base=12,
    ),
    Case(
        12,
        "addons imported only on the fresh path",
        ("import tensorflow_addons as tfa  # noqa: E402\n", "    opt = tfa.optimizers.NovoGrad("),
        ("\n", "    import tensorflow_addons as tfa\n\n    opt = tfa.optimizers.NovoGrad("),
        False,
        "`tfa` is not imported where this runs",
        base=12,
    ),
    Case(
        12,
        "NovoGrad given SGD's momentum",
        "tfa.optimizers.NovoGrad(learning_rate=scaled_lr, beta_1=0.9, beta_2=0.98)",
        "tfa.optimizers.NovoGrad(learning_rate=scaled_lr, momentum=args.momentum)",
        False,
        "NovoGrad has no momentum= setting",
        base=12,
    ),
    # Found on the learner-style corpus (tests/grader_cases/learners), where the reading was
    # confidently wrong.
    Case(
        12,
        "the cpu preset keeps SGD's base rate",
        "        base_lr=0.00625,",
        "        base_lr=0.0125,",
        False,
        "keeps SGD's base_lr",
    ),
    Case(
        8,
        "NovoGrad checkpoint loaded without custom_optimizers",
        "        custom_optimizers=[tfa.optimizers.NovoGrad],\n",
        "",
        False,
        "custom_optimizers=[tfa.optimizers.NovoGrad]",
        base=12,
    ),
    Case(
        2,
        "GPU pinned by a helper given the local rank",
        'if gpus:\n    tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")',
        'def use_one_gpu(index):\n    if gpus:\n        tf.config.set_visible_devices(gpus[index], "GPU")\n\n\n'
        "use_one_gpu(hvd.local_rank())",
        True,
    ),
    Case(
        2,
        "GPU pinned by a helper given the rank",
        'if gpus:\n    tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")',
        'def use_one_gpu(index):\n    if gpus:\n        tf.config.set_visible_devices(gpus[index], "GPU")\n\n\n'
        "use_one_gpu(hvd.rank())",
        False,
        "index by hvd.local_rank()",
    ),
]
