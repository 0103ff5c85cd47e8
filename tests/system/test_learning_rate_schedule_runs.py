"""The learning rate of every epoch, as the real scripts and Horovod's real callbacks set it.

The reference scripts train 40 epochs (the GPU preset's schedule) of one step each with a tiny
WideResNet on the committed sample, and the learning rate of each epoch is read back from the
checkpoint saved at its end (ModelCheckpoint saves the optimizer's config, learning rate
included). The solution runs on 2 workers, so its warmup really climbs; the starting script runs
as one plain process with the Keras LearningRateScheduler it begins with. Both are started by
the runner (workbook.runner's plan_run and execute), as the runner cell starts them.
"""

import json
import sys
import textwrap
from pathlib import Path

import h5py
import pytest

from processes import run_script
from workbook.facts import chain_file_name

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "solutions"
SAMPLE = REPO / "data" / "sample"
HOROVODRUN = Path(sys.executable).parent / "horovodrun"
RUN_TIMEOUT = 180  # seconds; a run takes about 25 s on 2 busy cores

EPOCHS, WARMUP_EPOCHS, BASE_LR = 40, 5, 0.0125  # the GPU preset's schedule
# The workbook's schedule after the warmup: x0.1 at epochs 15, 25 and 35 (Keras counts from 0).
DROPS = (15, 25, 35)
TINY = [
    "--preset",
    "gpu",  # 40 epochs, 5 of warmup
    "--depth",
    "10",
    "--width",
    "1",
    "--data-dir",
    str(SAMPLE),
    "--train-images",
    "64",
    "--test-images",
    "64",
    "--val-batch-size",
    "32",  # a batch a worker
]


def step_multiplier(epoch):
    return 0.1 ** sum(epoch >= drop for drop in DROPS)


def warmup_lr(epoch, scaled_lr, workers, steps_per_epoch=1):
    """Horovod's warmup at the first (here: only) step of `epoch` (horovod/_keras/callbacks.py):
    from scaled_lr / workers up to scaled_lr, counting the step about to run as done."""
    progress = epoch + 1 / steps_per_epoch
    return scaled_lr / workers * (progress * (workers - 1) / WARMUP_EPOCHS + 1)


def run(command, cwd, workers, timeout=RUN_TIMEOUT):
    """Runs a script through the runner to its end (`workers` under horovodrun, one thread
    each on 2 cores; 0: one plain process); it must succeed. Returns its output."""
    launcher = {"np": workers} if workers else {"np": 1, "launcher": "python"}
    result, output = run_script(
        command,
        cwd / "runner-logs",
        timeout=timeout,
        cwd=cwd,
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        **launcher,
    )
    assert result.exit_code == 0, output[-5000:]
    return output


def learning_rates(log_dir):
    """{epoch (from 0): the learning rate it trained with}, from checkpoint-{epoch + 1}.h5."""
    rates = {}
    for path in Path(log_dir).glob("checkpoint-*.h5"):
        with h5py.File(path, "r") as saved:
            config = json.loads(saved.attrs["training_config"])["optimizer_config"]["config"]
        rates[int(path.stem.split("-")[1]) - 1] = config["learning_rate"]
    return dict(sorted(rates.items()))


def assert_rates(actual, expected):
    assert sorted(actual) == list(range(EPOCHS)), f"epochs saved: {sorted(actual)}"
    wrong = {
        epoch: (actual[epoch], expected[epoch])
        for epoch in range(EPOCHS)
        if actual[epoch] != pytest.approx(expected[epoch], rel=1e-6)
    }
    assert not wrong, "epoch: (learning rate, expected): " + repr(wrong)


@pytest.mark.skipif(not HOROVODRUN.is_file(), reason="no horovodrun next to this Python")
def test_solution_warms_up_then_drops_tenfold_at_epochs_15_25_35(tmp_path):
    workers = 2
    run(
        [
            SOLUTIONS / "fashion_mnist_solution.py",
            *TINY,
            "--steps-per-epoch",
            workers,  # one step per worker and epoch
            "--log-dir",
            tmp_path / "logs",
        ],
        cwd=tmp_path,
        workers=workers,
    )
    scaled_lr = BASE_LR * workers
    expected = {
        epoch: (
            warmup_lr(epoch, scaled_lr, workers)
            if epoch < WARMUP_EPOCHS
            else scaled_lr * step_multiplier(epoch)
        )
        for epoch in range(EPOCHS)
    }
    assert expected[0] == pytest.approx(0.015) and expected[WARMUP_EPOCHS - 1] == scaled_lr
    assert_rates(learning_rates(tmp_path / "logs"), expected)


def test_starting_script_drops_tenfold_at_epochs_15_25_35(tmp_path):
    run(
        [
            SOLUTIONS / chain_file_name(0),
            *TINY,
            "--steps-per-epoch",
            1,
            "--log-dir",
            tmp_path / "logs",
        ],
        cwd=tmp_path,
        workers=0,
    )
    expected = {epoch: BASE_LR * step_multiplier(epoch) for epoch in range(EPOCHS)}
    assert_rates(learning_rates(tmp_path / "logs"), expected)


# What the step checker tells a learner who writes the schedule of Horovod's older examples
# (one callback per stretch, a number as multiplier), checked against the real callbacks.
CONSTANT_MULTIPLIERS = textwrap.dedent("""
    import json
    import numpy as np
    import tensorflow as tf
    import horovod.tensorflow.keras as hvd

    model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.legacy.SGD(1.0), loss="mse")
    callbacks = [
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=1.0, start_epoch=0, end_epoch=15,
                                                   multiplier=1.0),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=1.0, start_epoch=15, end_epoch=25,
                                                   multiplier=1e-1),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=1.0, start_epoch=25, end_epoch=35,
                                                   multiplier=1e-2),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=1.0, start_epoch=35, multiplier=1e-3),
    ]
    history = model.fit(np.zeros((1, 1)), np.zeros((1, 1)), epochs=40, callbacks=callbacks,
                        verbose=0)
    print("RATES " + json.dumps([float(rate) for rate in history.history["lr"]]))
    """)


def test_a_constant_multiplier_decays_every_epoch(tmp_path):
    output = run([sys.executable, "-c", CONSTANT_MULTIPLIERS], cwd=tmp_path, workers=0)
    rates = json.loads(output.split("RATES ", 1)[1].splitlines()[0])
    # multiplier m from start_epoch s sets m ** (epoch - s): x1 at each stretch's first epoch.
    expected = [1.0] * 15
    expected += [0.1**k for k in range(10)] + [0.01**k for k in range(10)]
    expected += [0.001**k for k in range(5)]
    assert rates == pytest.approx(expected, rel=1e-5)
    assert rates[15] == 1.0 and rates[16] == pytest.approx(0.1) and rates[24] < 1e-8
