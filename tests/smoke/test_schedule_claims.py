"""What the workbook says Horovod, TensorFlow and Keras do, shown by real runs.

notebooks/CLAIMS.md lists every behavioural claim of the notebooks and of the checker's
messages, with the test below that shows it (or, for GPU-only claims, Horovod's source).
tests/claims/two_workers.py runs the experiments under `horovodrun --gloo -np 2` on the committed
sample, a few batches each, many experiments in one horovodrun; rank 0 prints `CLAIM name {json}`.
A version of Horovod, TensorFlow or Keras that behaves otherwise fails a test here.

Here step 11's schedule experiments, in `make check` (one horovodrun, about 30 s); the others,
and the resume that hangs, are in tests/system/test_claims.py (make test).
"""

from __future__ import annotations

import pytest

from claim_runs import all_close, at, close, needs_horovodrun_and_sample, run_experiments

pytestmark = needs_horovodrun_and_sample

# Step 11's: they decide what the checker says about a Keras schedule beside the warmup.
SCHEDULE_EXPERIMENTS = ["schedules", "schedules_novograd", "schedules_long_warmup"]


@pytest.fixture(scope="module")
def schedule_claims(tmp_path_factory):
    return run_experiments(SCHEDULE_EXPERIMENTS, tmp_path_factory.mktemp("schedules"))


# ---- notebook 11 and step 11's check: schedules beside the warmup (make check) -------------

# two_workers.schedule_run: 2 warmup epochs of 3 batches, x0.1 from epoch 3, SGD momentum 0.9.
WARMUP, DROP, STEPS, MOMENTUM = 2, 3, 3, 0.9


def warmup_rate(scaled_lr: float, epoch: int, batch: int, steps: int = STEPS, warmup=WARMUP):
    """Horovod 0.28.1's warmup at a batch: horovod/_keras/callbacks.py, lines 196-200."""
    fraction = epoch + batch / steps + 1 / steps
    return scaled_lr / 2 * (fraction * (2 - 1) / warmup + 1)


def test_a_keras_schedule_beside_the_warmup_gives_the_same_rate_at_every_batch(schedule_claims):
    """Notebook 11: the warmup sets the rate at every batch of its epochs, after Keras's
    LearningRateScheduler set it at the epoch's start, so the Keras schedule undoes nothing."""
    runs = schedule_claims["schedules"]
    horovod = runs["horovod"]
    scaled = horovod["scaled_lr"]
    for epoch in range(WARMUP):
        for batch in range(STEPS):
            assert close(at(horovod, "lr", epoch, batch), warmup_rate(scaled, epoch, batch))
    assert close(at(horovod, "lr", 2), scaled) and close(at(horovod, "lr", DROP), scaled * 0.1)
    for name in ("keras_after", "keras_before", "keras_beside_horovod"):
        assert all_close(runs[name]["lr"], horovod["lr"]), name


def test_horovods_schedule_corrects_sgds_momentum_where_the_rate_drops(schedule_claims):
    """Notebook 11: what Horovod's LearningRateScheduleCallback adds is momentum correction:
    for the first batch after it changes the rate, momentum x new rate / old rate."""
    runs = schedule_claims["schedules"]
    horovod, keras = runs["horovod"], runs["keras_after"]
    assert close(at(horovod, "momentum", DROP), MOMENTUM * 0.1)  # the drop's first batch
    assert close(at(horovod, "momentum", DROP, 1), MOMENTUM)  # restored after it
    assert close(at(keras, "momentum", DROP), MOMENTUM)  # Keras's callback leaves it alone
    # The warmup corrects it too: at an epoch's start it sees the jump Keras made to scaled_lr.
    scaled = horovod["scaled_lr"]
    jump = warmup_rate(scaled, 1, 0) / scaled
    assert close(at(keras, "momentum", 1), MOMENTUM * jump)
    assert close(
        at(horovod, "momentum", 1),
        MOMENTUM * warmup_rate(scaled, 1, 0) / warmup_rate(scaled, 0, STEPS - 1),
    )
    # So the weights differ, a little.
    assert horovod["weights"] != keras["weights"]
    assert all_close(horovod["weights"], keras["weights"]) is False


def test_a_keras_schedule_beside_horovods_moves_its_momentum_correction(schedule_claims):
    """Step 11's note: Horovod's schedule then compares its rate with the one Keras just set, so
    the momentum is cut at the first batch of every epoch after the drop, not at the drop."""
    beside = schedule_claims["schedules"]["keras_beside_horovod"]
    assert close(at(beside, "momentum", DROP), MOMENTUM * 0.1)
    assert close(at(beside, "momentum", DROP + 1), MOMENTUM * 0.1)  # no drop there
    assert close(at(schedule_claims["schedules"]["horovod"], "momentum", DROP + 1), MOMENTUM)


def test_with_novograd_the_two_schedules_train_the_same(schedule_claims):
    """Notebook 11: NovoGrad has no momentum attribute to correct: the same rates, the same
    weights."""
    runs = schedule_claims["schedules_novograd"]
    assert all_close(runs["horovod"]["lr"], runs["keras_after"]["lr"])
    assert set(runs["horovod"]["momentum"]) == {None}
    assert runs["horovod"]["weights"] == runs["keras_after"]["weights"]


def test_a_warmup_longer_than_the_first_drop_delays_it_in_both(schedule_claims):
    """4 warmup epochs, x0.1 from epoch 3: both schedules keep warming up through epoch 3 and
    set scaled_lr x 0.1 at epoch 4."""
    runs = schedule_claims["schedules_long_warmup"]
    horovod = runs["horovod"]
    scaled = horovod["scaled_lr"]
    assert all_close(runs["keras_after"]["lr"], horovod["lr"])
    assert close(at(horovod, "lr", 3, 1), warmup_rate(scaled, 3, 1, steps=2, warmup=4))
    assert close(at(horovod, "lr", 4), scaled * 0.1)
    # Keras sets the dropped rate at epoch 3's start; the warmup's momentum correction then
    # multiplies by its rate over that one (notebook 11: 9.4, and a momentum of 8.4).
    jump = warmup_rate(scaled, 3, 0, steps=2, warmup=4) / (scaled * 0.1)
    assert round(jump, 1) == 9.4
    assert close(at(runs["keras_after"], "momentum", 3), MOMENTUM * jump)
    assert round(at(runs["keras_after"], "momentum", 3), 1) == 8.4
    assert at(horovod, "momentum", 3) < 1.0


def test_a_schedule_during_the_warmup_fights_it_and_spoils_the_momentum(schedule_claims):
    """Step 11's check: a LearningRateScheduleCallback from epoch 0 sets scaled_lr at the first
    batch of each warmup epoch, and the two callbacks' momentum restores undo each other."""
    runs = schedule_claims["schedules"]
    overlapping, horovod = runs["horovod_from_0"], runs["horovod"]
    scaled = horovod["scaled_lr"]
    assert close(at(overlapping, "lr", 0), scaled) and close(at(overlapping, "lr", 1), scaled)
    assert close(at(overlapping, "lr", 0, 1), warmup_rate(scaled, 0, 1))
    # After the warmup no callback corrects batch 1: it shows the momentum left behind.
    assert close(at(horovod, "momentum", 2, 1), MOMENTUM)
    assert not close(at(overlapping, "momentum", 2, 1), MOMENTUM)


def test_a_number_as_multiplier_decays_every_epoch(schedule_claims):
    """Notebook 11 and step 11's check: multiplier=m sets initial_lr * m ** (epoch - start)."""
    number = schedule_claims["schedules"]["number"]
    scaled = number["scaled_lr"]
    assert close(at(number, "lr", 0), scaled)  # before start_epoch=1: the optimizer's own
    for epoch in range(1, 5):
        assert close(at(number, "lr", epoch), scaled * 0.1 ** (epoch - 1)), epoch


def test_keras_schedule_alone_sets_the_scaled_rate_from_the_first_step(schedule_claims):
    """Notebook 10: step 10's script has the scaled rate from its first batch."""
    alone = schedule_claims["schedules"]["keras_alone"]
    scaled = alone["scaled_lr"]
    assert close(alone["lr"][0], scaled) and close(at(alone, "lr", DROP), scaled * 0.1)
