"""The lines of the reference scripts that the cases edit, written once."""

RANK0_BLOCK = "\nif hvd.rank() == 0:\n    callbacks.append("
CHECKPOINT_APPEND = "    callbacks.append(tf.keras.callbacks.ModelCheckpoint(checkpoint_format))\n"
BOARD_APPEND = "    callbacks.append(tf.keras.callbacks.TensorBoard(args.log_dir))\n"
BROADCAST_ITEM = "    hvd.callbacks.BroadcastGlobalVariablesCallback(0),\n"
AVERAGE_ITEM = "    hvd.callbacks.MetricAverageCallback(),\n"
LIST_END = "    throughput,\n]\n"
SHARD = "train_dataset = train_dataset.shard(hvd.size(), hvd.rank())\n"
STEPS_PER_WORKER = "steps_per_epoch = steps_per_epoch // hvd.size()"
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
