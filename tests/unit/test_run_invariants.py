"""The run check's invariants (grader/running/invariants/), judged from records written the way
the probe writes them (grader/running/probe.py's Record): each step's invariant is seen to hold,
to fail with its own words, and to say "can't tell". No run here: milliseconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from grader.report import CANT_TELL, FAILED, PASSED
from grader.running.evidence import Evidence, event_file_writers
from grader.running.expected import Recipe
from grader.running.invariants import Setting, findings
from grader.running.probe import Record, known_options
from grader.running.run_check import ASKED
from workbook.facts import LAST_STEP, STEPS

WARMUP = [0.015625, 0.01875, 0.021875, 0.025]  # Horovod's warmup over 4 steps, 2 workers
ARGS = {
    "values": {
        "base_lr": 0.0125,
        "warmup_epochs": 1.0,
        "lr_drops": [2],
        "epochs": 2,
        "train_images": 256,
        "batch_size": 32,
        "test_images": 64,
        "val_batch_size": 16,
        "momentum": 0.9,
    },
    "ignored": [],
}
FIT = {
    "initial_epoch": 0,
    "epochs": 2,
    "steps_per_epoch": 4,
    "callbacks": [],
    "optimizer": "SGD",
    "distributed_optimizer": True,
    "dataset": True,
    "line": 350,
    "code": "model.fit(",
    "top_line": 350,
}


def write_rank(folder: Path, rank: int, run: int = 1, **data) -> Record:
    record = Record(str(folder), "/x/fashion_mnist.py", run, rank)
    record.data.update(data)
    record.save()
    return record


def weights(seed: int, size: int = 50) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=size).astype(np.float32).astype(np.float64)


def first_step(record: Record, before: np.ndarray, update: np.ndarray, after=None) -> None:
    """The vectors the probe saves, with float32 rounding as in a real step."""
    moved = (before.astype(np.float32) + update.astype(np.float32)).astype(np.float64)
    record.save_vector("before-first-step", before)
    record.save_vector("first-update", moved - before)
    record.save_vector("after-first-step", moved if after is None else after)


def setting(tmp_path: Path) -> Setting:
    return Setting(
        np=2,
        log_dir=str(tmp_path / "logs"),
        first_epochs=2,
        final_epochs=3,
        asked=ASKED,
        sgd_preset_lr=0.025,
    )


def keys(first: int, count: int, batch: int) -> list:
    """The keys of `count` keyed images from `first` on, in batches of `batch`."""
    levels = [float(level) for level in range(first, first + count)]
    return [levels[at : at + batch] for at in range(0, count, batch)]


def good_ranks(tmp_path: Path, second=True, **per_rank) -> dict:
    """Two ranks that did everything right, in both runs; per_rank: {name: (rank0, rank1)}
    of the first run."""
    folder = tmp_path / "records"
    folder.mkdir(parents=True, exist_ok=True)
    update = weights(9) * 1e-3
    records = {}
    for rank in (0, 1):
        data = {
            "fit": dict(FIT),
            "args": ARGS,
            "train_keys": keys(128 * rank, 128, 32) * 2,  # its half of the 256, each epoch
            "val_keys": keys(32 * rank, 32, 16),  # its half of the 64 test images
            "val_steps": {"0": 2},
            "lr_callbacks": {"LearningRateWarmupCallback": 0.025},
            "lr": {"0": WARMUP, "1": [0.025] * 4},
            "steps": {"0": 4, "1": 4},
            "epoch_logs": {"0": {"loss": 2.31, "accuracy": 0.125}, "1": {"loss": 2.1}},
            "saved": ["/logs/checkpoint-1.h5", "/logs/checkpoint-2.h5"] if rank == 0 else [],
            "printed": {
                "chars": 120 if rank == 0 else 0,
                "first": "Epoch 1/2" if rank == 0 else "",
            },
            "horovod": {"initialized": True, "size": 2, "rank": rank, "local_rank": rank},
            "gpus": {"count": 2, "listed": [0, 1], "visible": [rank], "set": True},
            "finished": True,
        }
        for name, values in per_rank.items():
            data[name] = values[rank]
        records[rank] = write_rank(folder, rank, **data)
        first_step(records[rank], weights(rank), update, after=weights(7))
        if second:
            write_rank(
                folder,
                rank,
                run=2,
                args=ARGS,
                fit={**FIT, "initial_epoch": 2, "epochs": 3},
                lr={"2": [0.0025] * 4},
                steps={"2": 4},
                epoch_logs={"2": {"loss": 2.0}},
                finished=True,
            )
    return records


def second_run(tmp_path: Path, **data) -> None:
    """Both ranks' records of the second launch (the resume), with `data`."""
    for rank in (0, 1):
        write_rank(tmp_path / "records", rank, run=2, **data)


def judged(tmp_path: Path, step: int = LAST_STEP) -> dict:
    found = findings(Evidence.read(tmp_path / "records", 2), setting(tmp_path), step)
    return {finding.step: finding for finding in found}


def test_the_right_run_holds_every_invariant(tmp_path):
    good_ranks(tmp_path, fit=(dict(FIT, optimizer="NovoGrad"), dict(FIT, optimizer="NovoGrad")))
    found = judged(tmp_path)
    assert list(found) == list(STEPS)
    assert {step: f.status for step, f in found.items() if f.status != PASSED} == {}
    assert "0.025 = --base-lr 0.0125 × 2 workers" in found[10].message
    assert "and after resuming" in found[11].message
    assert "every rank resumed after epoch 2 and trained until epoch 3" in found[8].message


def test_only_the_steps_done_so_far_are_judged(tmp_path):
    good_ranks(tmp_path)
    assert list(judged(tmp_path, 5)) == [1, 2, 3, 4, 5]


def test_horovod_used_before_init_or_never_fails_step_1(tmp_path):
    good_ranks(tmp_path, horovod=({"initialized": False}, {"initialized": False}))
    assert "not initialized on ranks 0 and 1" in judged(tmp_path, 1)[1].message
    error = {
        "type": "ValueError",
        "message": "Horovod has not been initialized; use hvd.init().",
        "line": 280,
        "code": "verbose = 1 if hvd.rank() == 0 else 0",
    }
    good_ranks(tmp_path, error=(error, None))
    found = judged(tmp_path, 1)[1]
    assert (
        found.status == FAILED
        and "rank 0 used Horovod before hvd.init() at line 280" in found.message
    )


@pytest.mark.parametrize(
    "visible, words",
    [
        (([0, 1], [0, 1]), "rank 0 never chose a GPU, so it would use all 2"),
        (([0], [0]), "rank 1 chose GPU 0, not the GPU of its local rank"),
        (([], []), "rank 0 made no GPU visible"),
    ],
)
def test_gpus_simulated_show_each_rank_pinning_its_own(tmp_path, visible, words):
    states = tuple(
        {"count": 2, "listed": [0, 1], "visible": v, "set": v != [0, 1]} for v in visible
    )
    good_ranks(tmp_path, gpus=states)
    found = judged(tmp_path, 2)[2]
    assert found.status == FAILED and words in found.message, found.message


def test_a_second_rank_printing_fails_and_no_print_at_all_fails(tmp_path):
    good_ranks(
        tmp_path,
        printed=(
            {"chars": 90, "first": "Epoch"},
            {"chars": 40, "first": "Throughput: 100 images/s"},
        ),
    )
    found = judged(tmp_path, 3)[3]
    assert (
        found.status == FAILED
        and "rank 1 printed too (40 characters, beginning `Throughput" in found.message
    )
    good_ranks(tmp_path, printed=({"chars": 0, "first": ""}, {"chars": 0, "first": ""}))
    assert "no rank printed anything" in judged(tmp_path, 3)[3].message


def test_updates_that_differ_beyond_rounding_fail(tmp_path):
    records = good_ranks(tmp_path)
    first_step(records[1], weights(1), weights(9) * 1e-3 * 1.5)
    found = judged(tmp_path, 4)[4]
    assert (
        found.status == FAILED
        and "rank 0 and rank 1 changed their weights differently" in found.message
    )
    assert "hvd.DistributedOptimizer" in found.hint


def test_updates_that_differ_because_the_learning_rates_differ_blame_the_rates(tmp_path):
    """Issue 37 (3): what differs first is blamed: rank 1 trained at 1.5 times rank 0's rate,
    so its update is 1.5 times larger though the gradients were averaged."""
    faster = [rate * 1.5 for rate in WARMUP]
    records = good_ranks(tmp_path, lr=({"0": WARMUP, "1": [0.025] * 4}, {"0": faster}))
    first_step(records[1], weights(1), weights(9) * 1e-3 * 1.5)
    found = judged(tmp_path, 4)[4]
    assert found.status == CANT_TELL and "at different learning rates (rank 0: " in found.message
    assert "that differs first" in found.message
    assert judged(tmp_path, 11)[11].status == FAILED  # the schedule's step fails on the rates


def test_summed_gradients_fail_and_averaged_ones_hold(tmp_path):
    records = good_ranks(tmp_path)
    local = {0: weights(3), 1: weights(4)}
    for rank, record in records.items():
        record.save_vector("local-gradient", local[rank])
        record.save_vector("reduced-gradient", (local[0] + local[1]) / 2)
    found = judged(tmp_path, 4)[4]
    assert found.status == PASSED and "the average of the 2 ranks' gradients" in found.message
    for record in records.values():
        record.save_vector("reduced-gradient", local[0] + local[1])
    found = judged(tmp_path, 4)[4]
    assert found.status == FAILED and "by the sum of the 2 ranks' gradients" in found.message
    assert "op=hvd.Sum" in found.hint


def test_different_weights_after_the_first_step_fail(tmp_path):
    records = good_ranks(tmp_path)
    records[1].save_vector("after-first-step", weights(8))
    found = judged(tmp_path, 5)[5]
    assert found.status == FAILED and "the weights of rank 1 differ from rank 0's" in found.message


def test_weights_that_differ_after_the_resumed_launchs_first_step_fail(tmp_path):
    """A hand broadcast of model.variables before fit: equal in the first launch, but on resume
    rank 0's loaded optimizer state is never sent and the ranks drift apart."""
    good_ranks(tmp_path)
    for rank in (0, 1):
        record = write_rank(
            tmp_path / "records",
            rank,
            run=2,
            args=ARGS,
            finished=True,
            fit={**FIT, "initial_epoch": 2, "epochs": 3},
        )
        record.save_vector("after-first-step", weights(7 if rank == 0 else 8))
    found = judged(tmp_path, 5)[5]
    assert found.status == FAILED
    assert found.message.startswith(
        "after the first training step of the resumed launch the "
        "weights of rank 1 differ from rank 0's"
    )
    (tmp_path / "records" / "run2-rank1-after-first-step.npy").unlink()
    write_rank(
        tmp_path / "records",
        1,
        run=2,
        args=ARGS,
        finished=True,
        fit={**FIT, "initial_epoch": 2, "epochs": 3},
    ).save_vector("after-first-step", weights(7))
    found = judged(tmp_path, 5)[5]
    assert found.status == PASSED and found.message.endswith("in the resumed launch too")


def test_each_rank_on_images_of_its_own_holds(tmp_path):
    good_ranks(tmp_path)
    found = judged(tmp_path, 6)[6]
    assert found.status == PASSED, found.message
    assert "validated on test images of its own" in found.message


@pytest.mark.parametrize(
    "callback, step", [("BroadcastGlobalVariablesCallback", 5), ("MetricAverageCallback", 7)]
)
def test_a_collective_callback_on_rank_0_only_fails(tmp_path, callback, step):
    """Under `if hvd.rank() == 0:`: the run hangs in its first step, and the records say why."""
    good_ranks(tmp_path, second=False, fit=(dict(FIT, callbacks=[callback]), dict(FIT)))
    for path in (tmp_path / "records").glob("run1-rank*-after-first-step.npy"):
        path.unlink()
    found = judged(tmp_path, step)[step]
    assert found.status == FAILED, found.message
    assert (
        f"rank 0 passed hvd.callbacks.{callback} to model.fit and rank 1 did not" in found.message
    )


def test_ranks_that_share_images_fail(tmp_path):
    """Shuffled before sharding (each rank its own order): half of the images on both."""
    good_ranks(tmp_path, train_keys=(keys(0, 128, 32), keys(64, 128, 32)))
    found = judged(tmp_path, 6)[6]
    assert found.status == FAILED, found.message
    assert "rank 0 and rank 1 both trained on 64 of the same images" in found.message
    assert "before shuffling" in found.hint


@pytest.mark.parametrize(
    "train, steps, epochs, words",
    [
        (
            (keys(0, 128, 32) * 2, keys(128, 128, 32) * 2),
            8,
            2,
            "rank 0 went over its 128 images 2 times",
        ),
        ((keys(0, 64, 32), keys(128, 64, 32)), 2, 2, "the epoch covers only 50% of the data"),
        (None, 4, 1, "rank 0 trained until epoch 1, though --epochs asked for 2"),
    ],
)
def test_the_data_once_per_epoch(tmp_path, train, steps, epochs, words):
    fit = dict(FIT, epochs=epochs)
    more = {"train_keys": train} if train else {}
    good_ranks(tmp_path, steps=({"0": steps}, {"0": steps}), fit=(fit, fit), **more)
    found = judged(tmp_path, 6)[6]
    assert found.status == FAILED and words in found.message, found.message


@pytest.mark.parametrize(
    "validated, words",
    [
        ((keys(0, 64, 16), keys(0, 64, 16)), "rank 0 and rank 1 both validated on 64 of the same"),
        ((keys(0, 32, 16) * 2, keys(32, 32, 16) * 2), "rank 0 went over its 32 images 2 times"),
    ],
)
def test_validation_on_the_test_images_once(tmp_path, validated, words):
    """Unsharded validation, or validation_steps not divided: each worker repeats work."""
    good_ranks(tmp_path, val_keys=validated, val_steps=({"0": 4}, {"0": 4}))
    found = judged(tmp_path, 6)[6]
    assert found.status == FAILED and words in found.message, found.message
    assert "validation_dataset.shard" in found.hint


def test_keys_a_transform_merged_are_not_taken_for_images(tmp_path):
    """A per-image standardization makes every keyed image 0: counts only, no claim of overlap."""
    same = [[0.0] * 32] * 4
    good_ranks(tmp_path, train_keys=(same, same))
    assert judged(tmp_path, 6)[6].status == PASSED
    good_ranks(tmp_path, train_keys=(same * 2, same * 2), steps=({"0": 8}, {"0": 8}))
    found = judged(tmp_path, 6)[6]
    assert found.status == FAILED and "2 times over the data in one epoch" in found.message


def test_arrays_given_to_fit_are_named_whole(tmp_path):
    whole = [float(level) for level in range(256)]
    good_ranks(tmp_path, train_keys=([], []), array_keys=(whole, whole))
    found = judged(tmp_path, 6)[6]
    assert found.status == FAILED and "both trained on 256 of the same images" in found.message


def test_metrics_that_differ_fail(tmp_path):
    good_ranks(tmp_path, epoch_logs=({"0": {"loss": 2.31}}, {"0": {"loss": 2.45}}))
    found = judged(tmp_path, 7)[7]
    assert found.status == FAILED and "rank 0 2.3100, rank 1 2.4500" in found.message


def test_a_callback_that_saw_its_ranks_own_metrics_fails(tmp_path):
    """MetricAverageCallback after the readers: the end logs agree, ModelCheckpoint saw its own."""
    good_ranks(tmp_path, seen_logs=([{"callback": "ModelCheckpoint", "logs": {"loss": 2.29}}], []))
    found = judged(tmp_path, 7)[7]
    assert found.status == FAILED, found.message
    assert (
        "on rank 0 ModelCheckpoint recorded loss 2.2900, its own, not the value every rank "
        "ended the epoch with 2.3100"
    ) in found.message
    good_ranks(tmp_path, seen_logs=([{"callback": "ModelCheckpoint", "logs": {"loss": 2.31}}], []))
    assert judged(tmp_path, 7)[7].status == PASSED


OWN = ({"loss": 2.29, "accuracy": 0.1}, {"loss": 2.33, "accuracy": 0.15})  # each rank's batches


@pytest.mark.parametrize(
    "seen",
    [
        # the learner's own averaging callback, a LambdaCallback averaging in place, a Throughput
        # meter before the averaging: each saw its rank's own loss on entry, and records nothing
        [{"callback": "AverageLogs", "logs": {"loss": 2.29}, "reads": False}],
        [{"callback": "LambdaCallback", "logs": {"loss": 2.29}, "reads": False}],
        [
            {"callback": "Throughput", "logs": {"loss": 2.29}, "reads": False},
            {"callback": "ModelCheckpoint", "logs": {"loss": 2.31}, "reads": True},
        ],
    ],
)
def test_metrics_averaged_by_any_callback_before_the_readers_hold(tmp_path, seen):
    good_ranks(
        tmp_path,
        own_logs=OWN,
        seen_logs=(seen, []),
        epoch_logs=({"0": {"loss": 2.31, "accuracy": 0.125}},) * 2,
    )
    found = judged(tmp_path, 7)[7]
    assert found.status == PASSED, found.message
    assert "(the average of the ranks' own)" in found.message


def test_summed_metrics_fail_as_a_sum_not_as_an_average(tmp_path):
    good_ranks(
        tmp_path,
        own_logs=OWN,
        epoch_logs=({"0": {"loss": 4.62, "accuracy": 0.25}},) * 2,
        seen_logs=([{"callback": "ModelCheckpoint", "logs": {"loss": 2.29}, "reads": True}], []),
    )
    found = judged(tmp_path, 7)[7]
    assert found.status == FAILED
    assert found.message == (
        "every rank ended epoch 1 with loss 4.6200, the sum of the ranks' "
        "own (rank 0 2.2900, rank 1 2.3300), not their average 2.3100"
    )


def test_a_reader_that_saw_its_own_metric_is_named_against_the_average(tmp_path):
    good_ranks(
        tmp_path,
        own_logs=OWN,
        epoch_logs=({"0": {"loss": 2.31, "accuracy": 0.125}},) * 2,
        seen_logs=([{"callback": "CSVLogger", "logs": {"loss": 2.29}, "reads": True}], []),
    )
    found = judged(tmp_path, 7)[7]
    assert found.status == FAILED
    assert "CSVLogger recorded loss 2.2900, its own, not the average 2.3100" in found.message


def test_a_rank_that_never_got_there_cant_be_told(tmp_path):
    good_ranks(tmp_path, second=False)
    for path in (tmp_path / "records").glob("run1-rank1*"):
        path.unlink()
    write_rank(tmp_path / "records", 1, stages=[[0.0, "started"]])
    found = judged(tmp_path, 7)
    assert found[4].message == "can't tell: rank 1 never finished a training step"
    assert found[7].status == CANT_TELL
    # The script kept the run from showing them: no credit (grader/decision.py)
    assert all(found[step].withheld for step in (1, 2, 4, 5, 6, 7))


def test_what_the_check_can_not_see_is_not_withheld(tmp_path):
    """Blind spots of the check, not the script's doing: the reading may still decide them."""
    good_ranks(
        tmp_path, fit=(dict(FIT, dataset=False), dict(FIT, dataset=False)), train_keys=([], [])
    )
    found = judged(tmp_path, 6)[6]
    assert found.status == CANT_TELL and not found.withheld
    assert "neither a tf.data.Dataset nor arrays" in found.message


def test_no_checkpoint_at_all_shows_neither_the_writer_nor_the_resume(tmp_path):
    """TensorBoard's logs on rank 0 alone are no evidence that checkpoints stay there; with no
    checkpoint there is nothing to resume from: neither step is shown, neither is credited."""
    good_ranks(tmp_path, saved=([], []))
    rank1 = tmp_path / "records" / "run1-rank1.json"  # rank 1: another process than rank 0
    rank1.write_text(
        rank1.read_text().replace(f'"pid": {os.getpid()}', f'"pid": {os.getpid() + 1}')
    )
    (Path(setting(tmp_path).log_dir) / "train").mkdir(parents=True)
    (
        Path(setting(tmp_path).log_dir) / "train" / f"events.out.tfevents.1.vm.{os.getpid()}.0.v2"
    ).write_bytes(b"")
    found = judged(tmp_path, 9)
    assert found[9].status == CANT_TELL and found[9].withheld
    assert found[9].message == (
        "can't tell: rank 0 wrote TensorBoard logs but no checkpoint, so "
        "the run did not show that only rank 0 writes them"
    )
    assert found[8].status == CANT_TELL and found[8].withheld
    assert "the first run wrote no checkpoint" in found[8].message


@pytest.mark.parametrize(
    "starts, finals, words",
    [
        ((2, 0), (3, 3), "rank 0 resumed after epoch 2, rank 1 started from scratch"),
        ((3, 3), (3, 3), "every rank went on after epoch 3, but the newest checkpoint"),
        ((2, 2), (5, 5), "trained until epoch 5, not the 3 asked for"),
    ],
)
def test_the_resume(tmp_path, starts, finals, words):
    good_ranks(tmp_path)
    for rank in (0, 1):
        write_rank(
            tmp_path / "records",
            rank,
            run=2,
            args=ARGS,
            lr={"2": [0.0025] * 4},
            fit={**FIT, "initial_epoch": starts[rank], "epochs": finals[rank]},
            finished=True,
        )
    found = judged(tmp_path, 8)[8]
    assert found.status == FAILED and words in found.message, found.message


def test_a_second_run_that_never_ended_shows_no_resume(tmp_path):
    """A resume that hangs (a fresh optimizer's variables named otherwise): not a pass."""
    good_ranks(tmp_path)
    write_rank(
        tmp_path / "records",
        1,
        run=2,
        args=ARGS,
        fit={**FIT, "initial_epoch": 2, "epochs": 3},
        stages=[[1.0, "started model.fit"]],
    )
    found = judged(tmp_path, 8)[8]
    assert found.status == CANT_TELL and "in the second run, which never ended" in found.message
    assert found.withheld  # a resume that never ended earns nothing


def test_a_crash_when_resuming_is_told_not_blamed_here(tmp_path):
    """Whose fault it is, the crash's line tells (grader/decision.py): a NovoGrad import only the
    fresh start has is step 12's, not the resume's."""
    good_ranks(tmp_path)
    error = {"type": "NameError", "message": "name 'tfa' is not defined", "line": 370, "code": "x"}
    write_rank(tmp_path / "records", 0, run=2, error=error)
    found = judged(tmp_path, 8)[8]
    assert found.status == CANT_TELL and "NameError: name 'tfa' is not defined" in found.message


def test_a_second_writer_fails(tmp_path):
    good_ranks(tmp_path)
    assert judged(tmp_path, 9)[9].status == PASSED
    private = Path(setting(tmp_path).private_log_dir(1, 1))
    (private / "train").mkdir(parents=True)
    (private / "train" / "events.out.tfevents.1.vm.2.0.v2").write_bytes(b"")
    found = judged(tmp_path, 9)[9]
    assert found.status == FAILED and "rank 1 wrote 1 files into its own --log-dir" in found.message


def test_a_file_another_rank_opened_for_writing_anywhere_fails_step_9(tmp_path):
    """Issue 37 (6): a CSV log on every rank is a second writer, wherever it writes; rank 0's
    own files elsewhere and the other ranks' reads are not."""
    good_ranks(tmp_path, wrote=(["/work/training.csv", "/work/notes.txt"], ["/work/training.csv"]))
    found = judged(tmp_path, 9)[9]
    assert found.status == FAILED, found
    assert "rank 1 wrote 1 file outside its --log-dir (training.csv) too" in found.message
    good_ranks(tmp_path, wrote=(["/work/training.csv"], []))
    assert judged(tmp_path, 9)[9].status == PASSED


def test_event_files_belong_to_the_rank_whose_pid_wrote_them(tmp_path):
    (tmp_path / "validation").mkdir()
    (tmp_path / "validation" / "events.out.tfevents.17.my.host.42.3.v2").write_bytes(b"")
    (tmp_path / "events.out.tfevents.17.host.43.1.v2").write_bytes(b"")
    found = event_file_writers([tmp_path], {42: 1, 43: 0})
    assert found == {
        1: ["validation/events.out.tfevents.17.my.host.42.3.v2"],
        0: ["events.out.tfevents.17.host.43.1.v2"],
    }


@pytest.mark.parametrize(
    "rates, words",
    [
        ([0.0125] * 4, "stays at --base-lr 0.0125"),
        ([0.003125] * 4, "peaked at 0.003125, not 0.025"),
    ],
)
def test_learning_rates_that_are_not_scaled(tmp_path, rates, words):
    good_ranks(tmp_path, lr=({"0": rates, "1": rates}, {"0": rates, "1": rates}))
    good = judged(tmp_path, 10)
    assert good[10].status == FAILED and words in good[10].message


def test_the_scaled_rate_needs_a_finished_epoch_at_the_full_rate(tmp_path):
    """A run stopped in the warmup (a deadlock in step 1) shows no peak: not a fail."""
    good_ranks(
        tmp_path,
        second=False,
        lr=({"0": WARMUP[:1]}, {"0": WARMUP[:1]}),
        epoch_logs=({}, {}),
        steps=({}, {}),
    )
    found = judged(tmp_path, 11)
    assert found[10].status == CANT_TELL and "finished no epoch" in found[10].message
    assert found[11].status == CANT_TELL, found[11].message


def test_the_schedule_follows_the_scripts_own_scaled_rate(tmp_path):
    """A rate scaled wrongly (step 10's fault) but warmed up and dropped right: step 11 holds."""
    own = [rate / 8 for rate in WARMUP]
    good_ranks(
        tmp_path,
        lr=({"0": own, "1": [own[-1]] * 4}, {"0": own, "1": [own[-1]] * 4}),
        lr_callbacks=({"LearningRateWarmupCallback": own[-1]},) * 2,
    )
    for rank in (0, 1):
        write_rank(
            tmp_path / "records",
            rank,
            run=2,
            args=ARGS,
            lr={"2": [own[-1] / 10] * 4},
            fit={**FIT, "initial_epoch": 2, "epochs": 3},
            epoch_logs={"2": {}},
        )
    found = judged(tmp_path, 11)
    assert found[10].status == FAILED
    assert found[11].status == PASSED, found[11].message


def test_each_launch_is_held_to_the_options_it_parsed(tmp_path):
    """The second launch runs on the script's defaults (grader/running/run_check.py): one that starts
    from scratch there (rank 0 had no checkpoint) warms up over the default's epochs, not the
    first launch's; a rate off its own recipe still fails."""
    defaults = {
        "values": {
            **ARGS["values"],
            "warmup_epochs": 2.0,
            "lr_drops": [5],
            "epochs": 3,
            "batch_size": 64,
        },
        "ignored": [],
    }
    ramp = [0.0125 * (1 + (step / 2) / 2) for step in (1, 2)]  # 2 steps an epoch, over 2 epochs
    ramp2 = [0.0125 * (1 + (1 + step / 2) / 2) for step in (1, 2)]
    good_ranks(tmp_path)
    for rank in (0, 1):
        write_rank(
            tmp_path / "records",
            rank,
            run=2,
            args=defaults,
            lr={"0": ramp, "1": ramp2, "2": [0.025] * 2},
            steps={"0": 2, "1": 2, "2": 2},
            fit={**FIT, "initial_epoch": 0, "epochs": 3, "steps_per_epoch": 2},
            epoch_logs={"0": {}, "1": {}, "2": {}},
            finished=True,
        )
    assert judged(tmp_path, 11)[11].status == PASSED, judged(tmp_path, 11)[11].message
    for rank in (0, 1):
        write_rank(
            tmp_path / "records",
            rank,
            run=2,
            args=defaults,
            lr={"0": [0.025] * 2},
            steps={"0": 2},
            fit={**FIT, "initial_epoch": 0, "epochs": 3, "steps_per_epoch": 2},
            epoch_logs={"0": {}},
            finished=True,
        )
    found = judged(tmp_path, 11)[11]
    assert found.status == FAILED and "(its defaults)" in found.message, found.message


@pytest.mark.parametrize(
    "first, second, resumed, words",
    [
        ([0.025] * 4, [0.025] * 4, [0.0025] * 4, "no warmup"),
        ([0.0140625, 0.015625, 0.0171875, 0.01875], [0.025] * 4, [0.0025] * 4, "rises too slowly"),
        (WARMUP, [0.025] * 4, [0.025] * 4, "in epoch 3 (after resuming), step 1"),
        (WARMUP, [0.0025] * 4, [0.0025] * 4, "in epoch 2, step 1, the learning rate was 0.0025"),
    ],
)
def test_every_steps_rate_is_compared_with_the_recipe(tmp_path, first, second, resumed, words):
    good_ranks(tmp_path, lr=({"0": first, "1": second}, {"0": first, "1": second}))
    for rank in (0, 1):
        write_rank(
            tmp_path / "records",
            rank,
            run=2,
            args=ARGS,
            lr={"2": resumed},
            fit={**FIT, "initial_epoch": 2, "epochs": 3},
        )
    found = judged(tmp_path, 11)[11]
    assert found.status == FAILED and words in found.message, found.message


def test_a_run_stopped_before_the_drop_cant_tell_the_schedule(tmp_path):
    """A multiplier that never returns (the run's time limit in epoch 2): no pass from part."""
    good_ranks(tmp_path, second=False, lr=({"0": WARMUP}, {"0": WARMUP}))
    found = judged(tmp_path, 11)[11]
    assert found.status == CANT_TELL and "never trained epoch 2" in found.message


def test_ranks_with_other_rates_fail(tmp_path):
    good_ranks(
        tmp_path, lr=({"0": WARMUP, "1": [0.025] * 4}, {"0": [0.0125] * 4, "1": [0.025] * 4})
    )
    found = judged(tmp_path, 11)[11]
    assert (
        found.status == FAILED
        and "rank 1 used other learning rates than rank 0 in epoch 1" in found.message
    )


def test_the_recipe_is_horovods_warmup_then_the_drops():
    recipe = Recipe(base_lr=0.0125, workers=2, warmup_epochs=1, lr_drops=(2,))
    assert recipe.rates(0, 4) == pytest.approx(WARMUP)
    assert recipe.rates(1, 4) == pytest.approx([0.025] * 4)
    assert recipe.rates(2, 4) == pytest.approx([0.0025] * 4)


def test_a_momentum_corrected_warmup_is_named(tmp_path):
    corrected = [0.5, 0.9 * 0.01875 / 0.015625, 0.9 * 0.021875 / 0.01875, 0.9 * 0.025 / 0.021875]
    good_ranks(tmp_path, momentum=({"0": corrected, "1": [0.9] * 4}, {}))
    assert "with Horovod's momentum correction" in judged(tmp_path, 11)[11].message


def test_novograd_holds_on_every_rank_and_sgd_fails(tmp_path):
    good_ranks(tmp_path)
    assert "rank 0 trains with SGD, not NovoGrad" in judged(tmp_path, 12)[12].message


def test_novograd_made_after_the_wrap_fails_and_never_wrapping_is_step_4s(tmp_path):
    """NovoGrad replacing the DistributedOptimizer(SGD) already made is step 12's mistake; a
    script that wraps no optimizer at all (only when hvd.size() == 1) has step 4's."""
    bare = dict(FIT, optimizer="NovoGrad", distributed_optimizer=False)
    good_ranks(tmp_path, fit=(bare, bare), wrapped=(["SGD"], ["SGD"]))
    found = judged(tmp_path, 12)[12]
    assert found.status == FAILED, found.message
    assert "a bare NovoGrad, made after hvd.DistributedOptimizer wrapped SGD" in found.message
    good_ranks(tmp_path, fit=(bare, bare), wrapped=([], []))
    assert judged(tmp_path, 12)[12].status == PASSED


def test_novograd_at_sgds_preset_rate_fails(tmp_path):
    """The preset's base rate kept from SGD (Setting.sgd_preset_lr): step 12 halves it."""
    novograd = dict(FIT, optimizer="NovoGrad")
    kept = {**ARGS, "values": {**ARGS["values"], "base_lr": 0.025}}
    good_ranks(tmp_path, fit=(novograd, novograd), args=(kept, kept))
    found = judged(tmp_path, 12)[12]
    assert found.status == FAILED and "still gives SGD's --base-lr 0.025" in found.message


def test_the_probe_passes_only_the_options_a_script_knows():
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--lr-drops", type=int, nargs="*")
    kept, ignored = known_options(
        parser, ["--epochs", "2", "--warmup-epochs", "1", "--lr-drops", "2", "3", "--depth=4"]
    )
    assert kept == ["--epochs", "2", "--lr-drops", "2", "3"]
    assert ignored == ["--warmup-epochs", "--depth"]


def test_a_resume_that_stopped_for_another_step_takes_nothing_from_the_first_runs_schedule(
    tmp_path,
):
    """The first launch showed the warmup, the full rate and the drop; the resumed one stopped
    before training (a NovoGrad import only the fresh start has): the schedule is credited
    from the first run, saying so. A resume that ended but never trained its epoch can't tell."""
    good_ranks(tmp_path)
    second_run(
        tmp_path,
        args=ARGS,
        fit={**FIT, "initial_epoch": 2, "epochs": 3},
        error={"type": "UnboundLocalError", "message": "tfa", "line": 9, "code": "x"},
    )
    found = judged(tmp_path, 11)[11]
    assert found.status == PASSED and "the resumed run stopped before" in found.message, (
        found.message
    )
    second_run(tmp_path, args=ARGS, finished=True)
    found = judged(tmp_path, 11)[11]
    assert found.status == CANT_TELL and "never trained epoch 3" in found.message, found.message


def test_a_resume_whose_epochs_are_not_the_ones_asked_in_either_run_is_judged_by_where_it_went_on(
    tmp_path,
):
    """epochs=args.epochs // hvd.size(): both runs train to fewer epochs than asked (step 6's
    mistake); the resume itself went on after the newest checkpoint, on every rank."""
    halved = {**FIT, "epochs": 1}  # --epochs 2 on 2 workers
    good_ranks(tmp_path, fit=(halved, halved))
    second_run(
        tmp_path,
        args=ARGS,
        lr={"2": [0.0025] * 4},
        fit={**FIT, "initial_epoch": 2, "epochs": 4},  # its own last epoch, not the 3 asked
        finished=True,
    )
    found = judged(tmp_path, 8)[8]
    assert found.status == PASSED and "step 6 judges the epochs" in found.message, found.message


def test_steps_the_halved_epochs_kept_from_the_run_say_so(tmp_path):
    """epochs=args.epochs // hvd.size() trains the warmup epoch only: the full rate and the
    schedule after it are not shown, and the message names the cut epochs (step 6's), not
    only the epoch never trained."""
    halved = {**FIT, "epochs": 1}  # --epochs 2 on 2 workers
    only_warmup = {"0": WARMUP}
    good_ranks(tmp_path, second=False, fit=(halved, halved), lr=(only_warmup, only_warmup))
    found = judged(tmp_path)
    for step in (10, 11):
        assert found[step].status == CANT_TELL and found[step].withheld, found[step].message
        assert "trained 1 of the 2 epochs asked: step 6" in found[step].message, found[step].message
    good_ranks(tmp_path, second=False)
    assert "epochs asked" not in judged(tmp_path)[11].message
