"""Step 11's mistake cases: wrong versions of the step, and unusual but right ones."""

from __future__ import annotations

from grader_cases.mistakes.case import Case
from grader_cases.mistakes.edits import CPU_DROPS, GPU_DROPS, KERAS_NOTE, KERAS_SCHEDULE, LAMBDAS, LIST_END, RANK0_BLOCK, SCHEDULE_ARGS, SCHEDULE_CALL, SCHEDULE_LOOP, STRETCH_NOTE, WARMUP_ARGS, stretches

CASES = [
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
]
