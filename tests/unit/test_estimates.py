"""How long a run will take (workbook.estimates), from this machine's own measured pace, and the
learner's figures beside `make bench`'s."""

from __future__ import annotations

import re

import pytest

from run_folders import a_run, rewrite_record, times
from workbook import bench_results, estimates, run_times


def test_figures_beside_the_benchmarks_are_written_as_the_bench_writes_them():
    """Whole images/s and seconds, efficiency to 0.01, and '-' for a figure a run doesn't have
    (a 2-epoch reference never reaches 90%), not '1118.00' or 'NaN'."""
    from workbook.paths import REPO

    baseline = times(
        "baseline",
        epochs=(60, 59, 59, 59, 59),
        speed=1118.0,
        accuracy=[0.8, 0.85, 0.88, 0.905, 0.91],
    )
    reference = times("reference", epochs=(90, 90), speed=668.0, share=1)
    workers = times(
        "yours",
        epochs=(62, 59, 59, 59, 59),
        workers=2,
        speed=1090.0,
        accuracy=[0.8, 0.85, 0.88, 0.905, 0.91],
    )
    table = estimates.beside_bench(
        {"reference": reference, "distributed": workers, "baseline": baseline},
        REPO / "bench" / "results",
    )
    assert table.index.name is None  # no header row of its own (a walk saw an empty one)
    mine = table["yours"].tolist()
    assert all(isinstance(value, str) for value in mine)
    assert "1118" in mine and "1090" in mine and "0.82" in mine
    assert mine[-1] == "-"  # the reference's time to 90%
    assert not any("." in value for value in mine if value not in ("0.82",))


def test_the_reference_estimate_counts_one_worker_faster_than_each_of_two():
    """A walk: the estimate said 4.9 min for a reference that took 3.8, as if one worker
    trained at half the 2 workers' pace. With the benchmark's efficiency it is N x a worker's
    epoch x that efficiency; without a benchmark, N x at most."""
    from workbook.paths import REPO

    workers = times(
        "yours", epochs=(62, 58, 58, 58, 58), workers=2, steps=[58, 55, 55, 55, 55]
    )  # 20 s start-up, 10 s after training
    efficiency = bench_results.figures(REPO / "bench" / "results")["scaling efficiency, 2 workers"][
        0
    ]
    # Steps at the later epochs' pace, 275 s, and 16 s between them; the first epoch's extra 3 s.
    worker_epoch = (275 + 16) / 5
    expected = 20 + 3 + (2 * worker_epoch * efficiency) * 2 + 10  # 2 epochs
    text = estimates.estimate_reference(workers, 2, REPO / "bench" / "results")
    assert f"about {expected / 60:.1f} min for 2 epochs" in text
    assert f"x {efficiency:.2f}, the scaling efficiency" in text
    assert "at most" in estimates.estimate_reference(workers, 2)


def test_model_fits_end_is_measured_and_left_out_of_the_reference_estimate(tmp_path):
    """Issue 31: 20 s between the last epoch's end and model.fit's return (tf.data's autotuner
    thread, measured per rank) were copied into the reference's estimate, 25% high."""
    from workbook.paths import REPO

    folder = a_run(
        tmp_path / "workers",
        [62, 58, 58, 58, 58],
        after=31.7,
        step_seconds=[58, 55, 55, 55, 55],
        record={"workers": 2},
    )
    log = folder / "horovodrun.log"
    log.write_text(
        log.read_text().replace(
            '{"test_accuracy": 0.8}', '{"test_accuracy": 0.8, "train_seconds": 314.1}'
        )
    )
    workers = run_times.read_run(folder, "your workers")
    assert run_times.fit_end_wait(workers) == pytest.approx(314.1 - 294.0)
    text = estimates.estimate_reference(workers, 2, REPO / "bench" / "results")
    assert "Your workers also waited 20 s at the end of model.fit" in text
    minutes = float(re.search(r"about ([\d.]+) min", text).group(1))
    without = estimates.estimate_reference(
        run_times.read_run(
            a_run(
                tmp_path / "quick",
                [62, 58, 58, 58, 58],
                after=31.7 - 20.1,
                step_seconds=[58, 55, 55, 55, 55],
                record={"workers": 2},
            )
        ),
        2,
        REPO / "bench" / "results",
    )
    assert f"about {minutes:.1f} min" in without  # the wait is not copied
    assert run_times.fit_end_wait(times()) is None  # no folder, no RESULT: not known
    # The wait's cause is named only as far as it was measured (no CPU samples here).
    assert "at the end of model.fit (its cause was not measured)" in text
    assert "autotuner" not in text


def test_the_end_of_model_fit_is_put_on_other_programs_only_when_they_took_the_cpu(tmp_path):
    from dataclasses import replace

    folder = a_run(tmp_path / "base", [62, 58], after=31.7, record={"workers": 1})
    log = folder / "horovodrun.log"
    log.write_text(
        log.read_text().replace(
            '{"test_accuracy": 0.8}', '{"test_accuracy": 0.8, "train_seconds": 140.0}'
        )
    )
    baseline = run_times.read_run(folder, "baseline")
    quiet = estimates.expect_like_baseline(replace(baseline, others_after_training=0.4))
    assert "with the CPU to itself, so not other programs; its cause was not measured" in quiet
    assert "the workbook's turns it off" in quiet  # the autotuner: what it does, not the cause
    busy = estimates.expect_like_baseline(replace(baseline, others_after_training=25.0))
    assert "(other programs took 25 core-seconds of CPU in its 32 s: they can explain it)" in busy
    assert "autotuner" not in busy


def test_where_a_running_baseline_is_and_when_it_ends_from_its_own_pace(tmp_path):
    folder = a_run(tmp_path / "baseline", [70.0, 50.0], start_up=12.0)
    rewrite_record(folder, ended=None, ok=None)  # still running
    (folder / "horovodrun.log").write_text("Epoch 1/5\n...\nEpoch 2/5\n...\n")
    text = estimates.so_far(folder)
    assert "epoch 2 of 5 done, 2.2 min after its launch" in text  # 12 + 120 s
    assert "(50 s per epoch) the training ends in about 2.5 min, about 4.7 min" in text
    assert estimates.so_far(tmp_path / "nothing").startswith("Your baseline: no epoch")
    finished = a_run(tmp_path / "done", [70.0, 50.0], start_up=12.0, after=8.0)
    assert "has finished: 2.3 min from its launch to its end" in estimates.so_far(finished)


def test_printed_estimates_never_split_a_word():
    """JupyterLab's plain-text output breaks a long line anywhere ("(1736 a|gainst"): the
    estimates are shown as HTML paragraphs, or as text wrapped at word boundaries."""
    from workbook.prose import WIDTH, say

    text = estimates.expect_like_baseline(times("baseline", share=None)) + "\nA second one."
    shown = say(text)
    assert shown._repr_html_().count("<p ") == 2
    assert str(shown).split() == text.split()  # the same words, none cut
    assert max(len(row) for row in str(shown).splitlines()) <= WIDTH
    assert str(say("")) == "" and say("")._repr_html_() == ""
