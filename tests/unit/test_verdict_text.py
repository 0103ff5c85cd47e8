"""The verdict's words (workbook.verdict_text): a slow-down said plainly, the part of the time
that made the difference, and other processes' CPU named only when it could change the
verdict."""

from __future__ import annotations

from dataclasses import replace

from run_folders import a_run, times
from workbook import run_times, verdict_text
from workbook.facts import notebook_label
from workbook.run_times import speed_up

# --- the words --------------------------------------------------------------------------------


def test_runs_of_different_lengths_compare_over_the_same_epochs():
    # A reference stopped after 2 epochs: its first, then its later pace for the other three.
    assert run_times.training_for(times(epochs=(120, 100)), 5) == 520
    assert speed_up(times(epochs=(120, 100)), times(epochs=(60, 50, 50, 50, 50))) == 2.0
    text = verdict_text.verdict(times(epochs=(100, 100)), times(epochs=(50,)))
    assert "(it trained 1 epoch: its first, then its later epochs' pace for the rest)" in text


def test_the_verdict_names_a_longer_time_after_training_and_says_it_is_outside(tmp_path):
    reference = run_times.read_run(a_run(tmp_path / "ref", [100.0, 100.0], after=9.5), "baseline")
    slow_end = run_times.read_run(
        a_run(tmp_path / "slow", [100.0, 100.0], after=55.4), "your workers"
    )
    said = verdict_text.verdict(reference, slow_end)
    assert (
        "After training (the end of model.fit, the test-set evaluation, the per-class "
        "report, the exit): your workers 55.4 s, baseline 9.5 s, 45.9 s more."
    ) in said
    assert "not part of the training time or the time to 90% above" in said
    close = run_times.read_run(a_run(tmp_path / "close", [100.0, 100.0], after=15.0), "close")
    assert "After training" not in verdict_text.verdict(reference, close)  # 5.5 s: not named


def test_a_slow_down_is_said_plainly_with_numbers_and_reasons():
    reference = times("1 worker (reference)", epochs=(60, 50, 50), speed=400)
    yours = times("your workers", epochs=(90, 60, 60), workers=2, speed=560)
    text = verdict_text.verdict(reference, yours)
    assert (
        "A slow-down: your workers took 1.31x as long as 1 worker (reference) (50.0 s more)" in text
    )
    assert "so its speed is 0.76x" in text
    assert "210.0 s (3.5 min) of training for 3 epochs" in text
    assert "160.0 s (2.7 min) of training." in text
    # Without the steps' own time: the first epoch and the later ones.
    assert "the first took 90.0 s on your workers, 60.0 s on 1 worker (reference)" in text
    assert "each later one 60.0 s against 50.0 s (0.83x as fast)" in text
    assert "Each worker went at 70% of the pace of 1 worker (reference)" in text
    assert "allreduce of every step" in text
    timeline_notebook = notebook_label("where_does_the_time_go").capitalize()
    assert f"{timeline_notebook} measures the steps' part" in text
    assert "speed-up" not in text.lower().replace("a slow-down", "")


def test_the_verdict_names_the_part_that_made_the_difference():
    # The issue's case: the workers' steps were faster than the baseline's, the time went
    # outside them (the first epoch's graph and broadcast, validation on half the cores).
    baseline = times(
        "baseline", epochs=(81, 71, 71, 71, 71), share=None, speed=925, steps=[70, 65, 65, 65, 65]
    )
    yours = times(
        "your workers",
        epochs=(102, 76, 76, 76, 76),
        workers=2,
        speed=947,
        steps=[75, 63, 63, 63, 63],
    )
    text = verdict_text.verdict(baseline, yours)
    assert "A slow-down" in text
    assert (
        "the training steps took 315.0 s (5.2 min) on your workers against 325.0 s "
        "(5.4 min) (947 against 925 images/s)" in text
    )
    assert "between the steps (validation, checkpoints, TensorBoard) 79.0 s against 35.0 s" in text
    # Its cause is named only when measured: here nobody sampled the CPU.
    assert (
        "the first epoch's extra (its steps beyond a later epoch's) 12.0 s against 5.0 s." in text
    )
    assert "graph" not in text.split("the first epoch's extra")[1].split(".")[0]
    # The CPU measured to be theirs: the graph and the first broadcast, the cause left.
    quiet = [replace(run, others_first_epoch=0.5) for run in (baseline, yours)]
    assert (
        "12.0 s against 5.0 s (with the CPU to themselves: building the graph, the first "
        "broadcast)." in verdict_text.verdict(*quiet)
    )
    # Other programs measured to take a share of it: they are named, with what they took.
    loaded = replace(yours, others_first_epoch=87.0)
    assert (
        "12.0 s against 5.0 s (the first epoch of your workers: other programs took 87 "
        "core-seconds of CPU in its 102 s: that, not only the graph, can explain it)"
    ) in verdict_text.verdict(quiet[0], loaded)
    assert (
        "What made the difference: the time outside the steps, 51.0 s more on your "
        "workers (the other part: 10.0 s less)" in text
    )
    assert "of the pace of baseline" not in text  # one worker against the whole machine
    assert "waits for its allreduce" not in text  # the steps were not slower
    # Steps slower: then they made it, and the allreduce is named.
    slower = times("your workers", epochs=(80, 80), workers=2, speed=800, steps=[75, 75])
    text = verdict_text.verdict(
        times("baseline", epochs=(70, 70), share=None, speed=925, steps=[65, 65]), slower
    )
    assert "What made the difference: the training steps, 20.0 s more" in text
    assert "Every step also waits for its allreduce" in text


def test_against_the_whole_machine_the_reason_is_the_split_cores():
    baseline = times("baseline", share=None, speed=450)
    yours = times("yours", epochs=(110, 110), workers=2, speed=430)
    text = verdict_text.verdict(baseline, yours)
    assert text.splitlines()[2].startswith("A slow-down: yours took 1.10x as long")
    assert (
        "baseline had all the cores in one process; yours split them among 2 workers, "
        "1 core each" in text
    )


def test_a_speed_up_and_its_efficiency_from_images_per_second():
    text = verdict_text.verdict(
        times("one", speed=300), times("two", epochs=(55, 55), workers=2, speed=540)
    )
    assert "A speed-up: two trained 1.82x as fast." in text
    # speed's scaling efficiency: images/s, not the training times.
    assert (
        "Scaling efficiency 0.90 (images/s of the steps, 540 against 2 x 300): 2 workers "
        "with the same share each would be 2x at best." in text
    )
    assert "slow-down" not in text
    assert run_times.scaling_efficiency(times(share=None), times(workers=2)) is None


def test_about_the_same_speed_is_not_called_a_gain():
    text = verdict_text.verdict(times("a"), times("b", epochs=(101, 101)))
    assert "About the same speed: 0.99x" in text and "speed-up" not in text.lower()


def test_the_time_to_the_target_from_the_launch():
    a = times("a", epochs=(100, 100, 100), accuracy=[0.8, 0.9, 0.91])
    b = times("b", epochs=(50, 50, 50), accuracy=[0.85, 0.89, 0.905])
    assert (a.time_to(0.9), b.time_to(0.9)) == (220.0, 170.0)  # start-up 20 s included
    assert (
        "To 90% validation accuracy, from the launch (start-up included): b 170.0 s "
        "(2.8 min), a 220.0 s (3.7 min): 1.29x sooner." in verdict_text.verdict(a, b)
    )
    short = times("ref", epochs=(100, 100), accuracy=[0.8, 0.85])
    assert "ref did not reach it in its 2 epochs" in verdict_text.verdict(short, b)


# --- other processes' CPU ---------------------------------------------------------------------


def test_a_busy_neighbour_of_an_older_runner_is_named():
    busy = "`python fashion_mnist.py` (pid 7) used 98% of a core for 120 s of the run's 200 s"
    text = verdict_text.verdict(times("a", busy=[busy]), times("b"))
    assert f"Not a fair measure: during a, other processes used the CPU: {busy}." in text
    assert "during b" not in text


def test_only_a_share_that_can_change_the_verdict_is_flagged():
    # The baseline had the learner's check cells beside it: 12 s at 73% of a core, 9 core-s.
    baseline = times("baseline", epochs=(80, 75, 75, 75, 75), share=None, others=8.8)
    slow = times("yours", epochs=(100, 85, 85, 85, 85), workers=2)
    text = verdict_text.verdict(baseline, slow)
    assert "Not a fair measure" not in text
    assert (
        "Other processes took 1% of the CPU during the training of baseline (9 "
        "core-seconds in 380 s on 2 cores): it could have been up to 2% faster, which would "
        "not change this verdict." in text
    )
    # 60 core-seconds on the slower run could turn its 1.16x slow-down into about the same.
    busy = times(
        "yours",
        epochs=(100, 85, 85, 85, 85),
        workers=2,
        others=60.0,
        busy=["other processes took 5% of the CPU", "`python x.py` (pid 9) used ..."],
    )
    text = verdict_text.verdict(baseline, busy)
    assert (
        "Not a fair measure: other processes took 7% of the CPU during the training of "
        "yours (60 core-seconds in 440 s on 2 cores); without them it could have been up to 14% "
        "faster, enough to change this verdict (`python x.py` (pid 9) used ...). Run it "
        "again when nothing else runs." in text
    )
    one = times("baseline", epochs=(80, 75, 75, 75, 75), share=None, others=1.2)
    assert "(1 core-second in 380 s on 2 cores)" in verdict_text.verdict(one, slow)


def test_a_close_call_is_not_flagged_for_a_few_percent():
    """A learner's walk: 0.99x, other processes (their JupyterLab, browser, TensorBoard) took 1%
    and 3% of the CPU. Either could tip "about the same" to a slight difference, which is said;
    "Not a fair measure" is kept for a clear verdict the contention could have made."""
    baseline = times("baseline", epochs=(60, 59, 59, 59, 59), share=None, others=5.0)
    workers = times("yours", epochs=(62, 59, 59, 59, 59), workers=2, others=17.0)
    text = verdict_text.verdict(baseline, workers)
    assert "About the same speed: 0.99x" in text
    assert "Not a fair measure" not in text
    assert (
        "Other processes took 3% of the CPU during the training of yours (17 core-seconds "
        "in 298 s on 2 cores): it could have been up to 6% faster, which would tip this close "
        "call to a speed-up of at most 1.05x." in text
    )
    # The same share beside a clear verdict that it could undo is flagged.
    slow = times("yours", epochs=(62, 63, 63, 63, 63), workers=2, others=17.0)
    assert "Not a fair measure" in verdict_text.verdict(baseline, slow)


def test_a_figure_without_verdict_is_flagged_only_when_others_could_cost_a_tenth(tmp_path):
    """The where_does_the_time_go notebook's rule: a note with the share for a little
    contention, 'Not a fair measure' only when the worst case (a core-second per second)
    reaches 10% of the training."""
    run = run_times.read_run(a_run(tmp_path / "r", [60.0, 50.0]))
    assert verdict_text.contention_note(run) is None  # no samples
    run.others_core_seconds = 0.5
    assert verdict_text.contention_note(run) is None
    run.others_core_seconds = run.training * 0.05
    note = verdict_text.contention_note(run)
    assert note.startswith("Other processes took") and "up to 5% higher" in note
    run.others_core_seconds = run.training * 0.2
    assert verdict_text.contention_note(run).startswith("Not a fair measure")
