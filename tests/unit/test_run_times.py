"""A run timed from its folder (workbook.run_times): one time accounting for every run, from
Keras's TensorBoard scalars (tests/run_folders.py writes them with chosen wall times) and the
runner's record (workbook.runner.record.RunRecord, run.json)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from run_folders import STARTED, a_run, rewrite_record
from workbook import run_times, speed
from workbook.run_times import NotTimed, account
from workbook.runner.contention import BusyProcess
from workbook.runner.record import ContentionRecord, RunRecord
from workbook.speed import TimeParts

# --- the accounting ---------------------------------------------------------------------------


def test_three_times_that_never_overlap():
    started, ended = 1000.0, 1400.0
    walls = [1100.0, 1200.0, 1350.0]  # epochs end; the first was measured at 70 s
    start_up, training, after, ends = account(started, ended, walls, 70.0)
    assert start_up == 30.0  # 1000 -> 1030, the first epoch's start
    assert training == 320.0  # 1030 -> 1350
    assert after == 50.0  # 1350 -> 1400
    assert start_up + training + after == ended - started
    assert ends == [70.0, 170.0, 320.0] and ends[-1] == training


def test_unknown_ends_and_no_epoch():
    assert account(None, None, [50.0], 10.0)[0::2] == (None, None)
    with pytest.raises(NotTimed, match="no epoch has finished"):
        account(1.0, 2.0, [], 0.0)


# --- reading a run's folder -------------------------------------------------------------------


def test_a_run_is_timed_from_its_folder(tmp_path):
    run = run_times.read_run(
        a_run(tmp_path / "r", [60.0, 50.0, 50.0], speed=[80, 100, 120]), "mine"
    )
    assert (run.start_up, run.training, run.after_training) == pytest.approx((20, 160, 15))
    assert run.epoch_ends == pytest.approx([60, 110, 160])
    assert run.accuracy == pytest.approx([0.5, 0.6, 0.7])
    assert run.images_per_second == pytest.approx(110)  # the first epoch left out
    assert run.test_accuracy == 0.8 and run.epochs == [0, 1, 2] and run.cores_per_worker == 1
    assert run.hardware == "1 worker pinned to 1 core of 2; no GPU"


def test_a_reused_folder_counts_only_the_last_launch(tmp_path):
    folder = a_run(tmp_path / "r", [60.0, 50.0])
    rewrite_record(folder, started=STARTED + 90)  # relaunched after the first epoch
    assert run_times.read_run(folder).epochs == [1]


def test_the_baselines_hardware(tmp_path):
    folder = a_run(
        tmp_path / "b",
        [60.0],
        record={"launcher": "python", "threads_per_worker": None, "pinned": False, "layout": "x"},
    )
    run = run_times.read_run(folder)
    assert run.hardware == "1 process without Horovod, all 2 cores; no GPU"
    assert run.cores_per_worker is None


def test_a_folder_without_epochs_is_not_timed(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotTimed, match="empty: no finished epoch"):
        run_times.read_run(tmp_path / "empty")


def test_the_newest_finished_run(tmp_path):
    a_run(tmp_path / "baseline-1", [10.0])
    a_run(tmp_path / "baseline-2", [10.0])
    (tmp_path / "baseline-3").mkdir()  # still running: no RESULT yet
    assert run_times.newest_finished(tmp_path, "baseline-*") == tmp_path / "baseline-2"
    assert run_times.newest_finished(tmp_path, "none-*") is None


def test_a_run_in_parts_from_its_folder(tmp_path):
    folder = a_run(tmp_path / "r", [60.0, 50.0, 50.0], step_seconds=[50.0, 40.0, 40.0])
    parts = run_times.read_run(folder).parts
    assert parts == TimeParts(
        start_up=20.0, first_epoch_extra=10.0, steps=120.0, between_steps=30.0, after_training=15.0
    )
    # A script that logs no step_seconds: the parts it cannot know are None.
    assert run_times.read_run(a_run(tmp_path / "old", [60.0])).parts.steps is None


def test_the_record_the_runner_writes_is_the_record_read(tmp_path):
    """run.json has one description, RunRecord: what is written is what is read, the contention
    with its busy processes included; a folder without one reads as an empty record."""
    contention = ContentionRecord(
        sampled_seconds=12.0,
        others_core_seconds=3.5,
        cores=2,
        samples=[[STARTED + 2, 1.5], [STARTED + 4, 2.0]],
        busy_processes=[BusyProcess(7, "python x.py", 10.0, 3.0)],
    )
    record = RunRecord(
        run_name="r",
        launcher="horovodrun",
        workers=2,
        threads_per_worker=1,
        cores=2,
        pinned=True,
        started=STARTED,
        ended=STARTED + 60,
        ok=True,
        busy_others=["`python x.py` (pid 7) used ..."],
        contention=contention,
    )
    record.write(tmp_path)
    assert RunRecord.read(tmp_path) == record
    assert RunRecord.read(tmp_path / "nothing") == RunRecord()
    assert not RunRecord().finished and RunRecord(ended=STARTED).finished  # an older runner's
    assert not replace(record, ok=False).finished


# --- one vocabulary ---------------------------------------------------------------------------


def test_one_definition_of_each_figure():
    assert speed.images_per_second([500.0, 900.0, 950.0]) == 925.0  # epochs after the first
    assert speed.images_per_second([500.0]) == 500.0 and speed.images_per_second([]) is None
    assert speed.images_per_second_label(5) == "images/s (steps, epochs 2-5)"
    assert speed.images_per_second_label(2) == "images/s (steps, epoch 2)"
    assert speed.images_per_second_label(1) == "images/s (steps, epoch 1)"
    assert speed.time_to_accuracy([(100, 0.8), (160, 0.9), (220, 0.95)], 0.9) == 160
    assert speed.time_to_accuracy([(100, 0.8)], 0.9) is None
    assert speed.scaling_efficiency(1200.0, 2, 660.0) == pytest.approx(0.909, abs=1e-3)
    assert speed.ceiling_share(1200.0, 1320.0) == pytest.approx(0.909, abs=1e-3)
    assert speed.worst_case_slowdown(34.0, 487.0) == pytest.approx(0.07, abs=1e-3)
