"""Mistake cases by kind, across steps: each case still names the step it fails or passes."""

from __future__ import annotations

from grader_cases.mistakes.case import Case
from grader_cases.mistakes.edits import AVERAGE_ITEM, BROADCAST, BROADCAST_ITEM, FIND, LIST_END, PIN, RANK0_BLOCK, SCALED, SCHEDULE_ARGS, SCHEDULE_CALL, SHARD, STEPS_PER_WORKER, TEST_RESULTS, VALIDATION, WRAP

CASES = [
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
        STEPS_PER_WORKER,
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
        (STEPS_PER_WORKER, VALIDATION, "hvd.init()\n"),
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
        (STEPS_PER_WORKER, "hvd.init()\n"),
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
        (STEPS_PER_WORKER, "hvd.init()\n"),
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
