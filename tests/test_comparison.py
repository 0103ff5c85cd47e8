"""Runs compared fairly: one time accounting for every run, one ratio, and words for a slow-down.

Fast tests time runs from TensorBoard event files written with chosen wall times (Keras's
format: tensor scalars under train/ and validation/) and the runner's run.json. The slow test
runs notebook 00 (the baseline) and notebook 13 headless, with the solution as the learner's
script, and checks that its figures agree with each other.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from test_notebooks import kernel_name  # noqa: F401 (the notebooks' test kernel, a fixture)
from workbook import comparison
from workbook import estimates
from workbook import speed
from workbook.comparison import NotTimed, RunTimes, account, speed_up
from workbook.speed import TimeParts

STARTED = 1_800_000_000.0  # a time.time() value


def write_scalars(folder: Path, tag: str, points: list[tuple[float, int, float]]) -> None:
    """Keras's epoch scalars: tensor summaries of the scalars plugin, at the given wall times."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util.tensor_util import make_tensor_proto

    writer = EventFileWriter(str(folder))
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    for wall, step, value in points:
        summary = Summary(
            value=[Summary.Value(tag=tag, tensor=make_tensor_proto(value), metadata=metadata)]
        )
        writer.add_event(Event(wall_time=wall, step=step, summary=summary))
    writer.close()


def a_run(
    folder: Path,
    epoch_seconds: list[float],
    start_up: float = 20.0,
    after: float = 15.0,
    record: dict | None = None,
    speed: list[float] | None = None,
    step_seconds: list[float] | None = None,
) -> Path:
    """A run folder as the runner and the script leave it, with known times."""
    folder.mkdir(parents=True)
    ends, wall = [], STARTED + start_up
    for seconds in epoch_seconds:
        wall += seconds
        ends.append(wall)
    write_scalars(folder / "train", "epoch_epoch_seconds",
                  [(end, epoch, s) for epoch, (end, s) in enumerate(zip(ends, epoch_seconds))])
    speeds = speed or [100.0] * len(ends)
    write_scalars(folder / "train", "epoch_images_per_second",
                  [(end, epoch, v) for epoch, (end, v) in enumerate(zip(ends, speeds))])
    if step_seconds:
        write_scalars(folder / "train", "epoch_step_seconds",
                      [(end, epoch, v) for epoch, (end, v) in enumerate(zip(ends, step_seconds))])
    write_scalars(folder / "validation", "epoch_accuracy",
                  [(end, epoch, 0.5 + 0.1 * epoch) for epoch, end in enumerate(ends)])
    (folder / "run.json").write_text(json.dumps({
        "started": STARTED, "ended": ends[-1] + after, "launcher": "horovodrun", "workers": 1,
        "threads_per_worker": 1, "cores": 2, "gpus": 0, "pinned": True, "ok": True,
        "layout": "1 worker x 1 thread pinned to 1 of 2 CPU cores", "busy_others": [],
        **(record or {}),
    }))
    (folder / "horovodrun.log").write_text('# x\n# y\n[0]<stdout>:RESULT {"test_accuracy": 0.8}\n')
    return folder


def times(label="run", epochs=(100.0, 100.0), workers=1, share=1, speed=300.0, busy=(),
          steps=None, others=None, accuracy=None):
    """A timed run; steps: each epoch's step_seconds (then its parts are known)."""
    ends = [sum(epochs[: i + 1]) for i in range(len(epochs))]
    parts = None if steps is None else speed_module.time_parts(20.0, 10.0, list(epochs), steps)
    return RunTimes(
        label=label, hardware=f"{workers} workers", workers=workers, cores_per_worker=share,
        epochs=list(range(len(epochs))), epoch_ends=ends,
        accuracy=list(accuracy or [0.8] * len(epochs)),
        start_up=20.0, training=ends[-1], after_training=10.0, images_per_second=speed,
        busy_others=list(busy), parts=parts, others_core_seconds=others, cores=2,
    )


speed_module = speed  # times() has a parameter named speed


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


def test_a_run_is_timed_from_its_folder(tmp_path):
    run = comparison.read_run(a_run(tmp_path / "r", [60.0, 50.0, 50.0], speed=[80, 100, 120]),
                              "mine")
    assert (run.start_up, run.training, run.after_training) == pytest.approx((20, 160, 15))
    assert run.epoch_ends == pytest.approx([60, 110, 160])
    assert run.accuracy == pytest.approx([0.5, 0.6, 0.7])
    assert run.images_per_second == pytest.approx(110)  # the first epoch left out
    assert run.test_accuracy == 0.8 and run.epochs == [0, 1, 2] and run.cores_per_worker == 1
    assert run.hardware == "1 worker pinned to 1 core of 2; no GPU"


def test_a_reused_folder_counts_only_the_last_launch(tmp_path):
    folder = a_run(tmp_path / "r", [60.0, 50.0])
    record = json.loads((folder / "run.json").read_text())
    record["started"] = STARTED + 90  # relaunched after the first epoch
    (folder / "run.json").write_text(json.dumps(record))
    assert comparison.read_run(folder).epochs == [1]


def test_the_baselines_hardware(tmp_path):
    folder = a_run(tmp_path / "b", [60.0], record={
        "launcher": "python", "threads_per_worker": None, "pinned": False, "layout": "x"})
    run = comparison.read_run(folder)
    assert run.hardware == "1 process without Horovod, all 2 cores; no GPU"
    assert run.cores_per_worker is None


def test_a_folder_without_epochs_is_not_timed(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotTimed, match="empty: no finished epoch"):
        comparison.read_run(tmp_path / "empty")


def test_the_newest_finished_run(tmp_path):
    a_run(tmp_path / "baseline-1", [10.0])
    a_run(tmp_path / "baseline-2", [10.0])
    (tmp_path / "baseline-3").mkdir()  # still running: no RESULT yet
    assert comparison.newest_finished(tmp_path, "baseline-*") == tmp_path / "baseline-2"
    assert comparison.newest_finished(tmp_path, "none-*") is None


# --- one ratio everywhere ---------------------------------------------------------------------


def test_the_ratio_the_table_the_plot_and_tensorboard_agree(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    reference = comparison.read_run(a_run(tmp_path / "ref", [100.0, 100.0]), "reference")
    mine = comparison.read_run(a_run(tmp_path / "mine", [70.0, 55.0]), "mine")
    ratio = speed_up(reference, mine)
    assert ratio == pytest.approx(200 / 125)
    table = comparison.table([reference, mine], reference)
    assert table.loc["mine", "training speed vs reference"] == round(ratio, 2)
    assert table.loc["mine", "training (s)"] == 125.0
    assert table.loc["mine", "images/s (steps, epochs after the first)"] == 100
    ax = comparison.plot([reference, mine])
    # The plot's time is speed's time to an accuracy: since the launch, start-up included.
    assert list(ax.lines[1].get_xdata()) == pytest.approx([90 / 60, 145 / 60])
    folder = comparison.write_tensorboard_timing(mine)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    written = [(e.step, e.value) for e in events.Scalars(comparison.TIMING_TAG)]
    assert written == [(0, pytest.approx(70 / 60)), (1, pytest.approx(125 / 60))]
    comparison.write_tensorboard_timing(mine)  # again: rewritten, not appended
    assert len(list(folder.iterdir())) == 1


def test_the_table_shows_a_dash_for_a_missing_figure_and_whole_images_per_second(tmp_path):
    reference = comparison.read_run(a_run(tmp_path / "ref", [100.0, 100.0]), "reference")
    mine = comparison.read_run(a_run(tmp_path / "mine", [70.0, 55.0], speed=[99.6, 99.6]),
                               "mine")
    table = comparison.table([reference, mine], reference)
    assert table.loc["mine", "images/s (steps, epochs after the first)"] == 100
    assert str(table.loc["mine", "images/s (steps, epochs after the first)"]) == "100"
    assert (table["to 90%, from the launch (s)"] == "-").all()  # 0.6 accuracy at best
    assert "NaN" not in table.to_string() and "nan" not in table.to_html()


def test_the_verdict_names_a_longer_time_after_training_and_says_it_is_outside(tmp_path):
    reference = comparison.read_run(a_run(tmp_path / "ref", [100.0, 100.0], after=9.5), "baseline")
    slow_end = comparison.read_run(a_run(tmp_path / "slow", [100.0, 100.0], after=55.4),
                                   "your workers")
    said = comparison.verdict(reference, slow_end)
    assert ("After training (the end of model.fit, the test-set evaluation, the per-class "
            "report, the exit): your workers 55.4 s, baseline 9.5 s, 45.9 s more.") in said
    assert "not part of the training time or the time to 90% above" in said
    close = comparison.read_run(a_run(tmp_path / "close", [100.0, 100.0], after=15.0), "close")
    assert "After training" not in comparison.verdict(reference, close)  # 5.5 s: not named


def test_runs_of_different_lengths_compare_over_the_same_epochs():
    # A reference stopped after 2 epochs: its first, then its later pace for the other three.
    assert comparison.training_for(times(epochs=(120, 100)), 5) == 520
    assert speed_up(times(epochs=(120, 100)), times(epochs=(60, 50, 50, 50, 50))) == 2.0
    text = comparison.verdict(times(epochs=(100, 100)), times(epochs=(50,)))
    assert "(it trained 1 epoch: its first, then its later epochs' pace for the rest)" in text


def test_a_run_in_parts_from_its_folder(tmp_path):
    folder = a_run(tmp_path / "r", [60.0, 50.0, 50.0], step_seconds=[50.0, 40.0, 40.0])
    parts = comparison.read_run(folder).parts
    assert parts == TimeParts(start_up=20.0, first_epoch_extra=10.0, steps=120.0,
                              between_steps=30.0, after_training=15.0)
    assert parts.outside_steps == 75.0
    # A script that logs no step_seconds: the parts it cannot know are None.
    assert comparison.read_run(a_run(tmp_path / "old", [60.0])).parts.steps is None


# --- the words --------------------------------------------------------------------------------


def test_a_slow_down_is_said_plainly_with_numbers_and_reasons():
    reference = times("1 worker (reference)", epochs=(60, 50, 50), speed=400)
    yours = times("your workers", epochs=(90, 60, 60), workers=2, speed=560)
    text = comparison.verdict(reference, yours)
    assert "A slow-down: your workers took 1.31x as long as 1 worker (reference) (50.0 s more)" \
        in text
    assert "so its speed is 0.76x" in text
    assert "210.0 s (3.5 min) of training for 3 epochs" in text
    assert "160.0 s (2.7 min) of training." in text
    # Without the steps' own time: the first epoch and the later ones.
    assert "the first took 90.0 s on your workers, 60.0 s on 1 worker (reference)" in text
    assert "each later one 60.0 s against 50.0 s (0.83x as fast)" in text
    assert "Each worker went at 70% of the pace of 1 worker (reference)" in text
    assert "allreduce of every step" in text and "Notebook 19" in text
    assert "speed-up" not in text.lower().replace("a slow-down", "")


def test_the_verdict_names_the_part_that_made_the_difference():
    # The issue's case: the workers' steps were faster than the baseline's, the time went
    # outside them (the first epoch's graph and broadcast, validation on half the cores).
    baseline = times("baseline", epochs=(81, 71, 71, 71, 71), share=None, speed=925,
                     steps=[70, 65, 65, 65, 65])
    yours = times("your workers", epochs=(102, 76, 76, 76, 76), workers=2, speed=947,
                  steps=[75, 63, 63, 63, 63])
    text = comparison.verdict(baseline, yours)
    assert "A slow-down" in text
    assert "the training steps took 315.0 s (5.2 min) on your workers against 325.0 s " \
        "(5.4 min) (947 against 925 images/s)" in text
    assert "between the steps (validation, checkpoints, TensorBoard) 79.0 s against 35.0 s" \
        in text
    assert "the first epoch's extra (graph, first broadcast) 12.0 s against 5.0 s" in text
    assert "What made the difference: the time outside the steps, 51.0 s more on your " \
        "workers (the other part: 10.0 s less)" in text
    assert "of the pace of baseline" not in text  # one worker against the whole machine
    assert "waits for its allreduce" not in text  # the steps were not slower
    # Steps slower: then they made it, and the allreduce is named.
    slower = times("your workers", epochs=(80, 80), workers=2, speed=800, steps=[75, 75])
    text = comparison.verdict(times("baseline", epochs=(70, 70), share=None, speed=925,
                                    steps=[65, 65]), slower)
    assert "What made the difference: the training steps, 20.0 s more" in text
    assert "Every step also waits for its allreduce" in text


def test_against_the_whole_machine_the_reason_is_the_split_cores():
    baseline = times("baseline", share=None, speed=450)
    yours = times("yours", epochs=(110, 110), workers=2, speed=430)
    text = comparison.verdict(baseline, yours)
    assert text.splitlines()[2].startswith("A slow-down: yours took 1.10x as long")
    assert "baseline had all the cores in one process; yours split them among 2 workers, " \
        "1 core each" in text


def test_a_speed_up_and_its_efficiency_from_images_per_second():
    text = comparison.verdict(times("one", speed=300),
                              times("two", epochs=(55, 55), workers=2, speed=540))
    assert "A speed-up: two trained 1.82x as fast." in text
    # speed's scaling efficiency: images/s, not the training times.
    assert "Scaling efficiency 0.90 (images/s of the steps, 540 against 2 x 300): 2 workers " \
        "with the same share each would be 2x at best." in text
    assert "slow-down" not in text
    assert comparison.scaling_efficiency(times(share=None), times(workers=2)) is None


def test_about_the_same_speed_is_not_called_a_gain():
    text = comparison.verdict(times("a"), times("b", epochs=(101, 101)))
    assert "About the same speed: 0.99x" in text and "speed-up" not in text.lower()


def test_the_time_to_the_target_from_the_launch():
    a = times("a", epochs=(100, 100, 100), accuracy=[0.8, 0.9, 0.91])
    b = times("b", epochs=(50, 50, 50), accuracy=[0.85, 0.89, 0.905])
    assert (a.time_to(0.9), b.time_to(0.9)) == (220.0, 170.0)  # start-up 20 s included
    assert "To 90% validation accuracy, from the launch (start-up included): b 170.0 s " \
        "(2.8 min), a 220.0 s (3.7 min): 1.29x sooner." in comparison.verdict(a, b)
    short = times("ref", epochs=(100, 100), accuracy=[0.8, 0.85])
    assert "ref did not reach it in its 2 epochs" in comparison.verdict(short, b)


def test_a_busy_neighbour_of_an_older_runner_is_named():
    busy = "`python fashion_mnist.py` (pid 7) used 98% of a core for 120 s of the run's 200 s"
    text = comparison.verdict(times("a", busy=[busy]), times("b"))
    assert f"Not a fair measure: during a, other processes used the CPU: {busy}." in text
    assert "during b" not in text


def test_only_a_share_that_can_change_the_verdict_is_flagged():
    # The baseline had the learner's check cells beside it: 12 s at 73% of a core, 9 core-s.
    baseline = times("baseline", epochs=(80, 75, 75, 75, 75), share=None, others=8.8)
    slow = times("yours", epochs=(100, 85, 85, 85, 85), workers=2)
    text = comparison.verdict(baseline, slow)
    assert "Not a fair measure" not in text
    assert "Other processes took 1% of the CPU during the training of baseline (9 " \
        "core-seconds in 380 s on 2 cores): it could have been up to 2% faster, which would " \
        "not change this verdict." in text
    # 60 core-seconds on the slower run could turn its 1.16x slow-down into about the same.
    busy = times("yours", epochs=(100, 85, 85, 85, 85), workers=2, others=60.0,
                 busy=["other processes took 5% of the CPU", "`python x.py` (pid 9) used ..."])
    text = comparison.verdict(baseline, busy)
    assert "Not a fair measure: other processes took 7% of the CPU during the training of " \
        "yours (60 core-seconds in 440 s on 2 cores); without them it could have been up to 14% " \
        "faster, enough to change this verdict (`python x.py` (pid 9) used ...). Run it " \
        "again when nothing else runs." in text
    one = times("baseline", epochs=(80, 75, 75, 75, 75), share=None, others=1.2)
    assert "(1 core-second in 380 s on 2 cores)" in comparison.verdict(one, slow)


def test_a_close_call_is_not_flagged_for_a_few_percent():
    """A learner's walk: 0.99x, other processes (their JupyterLab, browser, TensorBoard) took 1%
    and 3% of the CPU. Either could tip "about the same" to a slight difference, which is said;
    "Not a fair measure" is kept for a clear verdict the contention could have made."""
    baseline = times("baseline", epochs=(60, 59, 59, 59, 59), share=None, others=5.0)
    workers = times("yours", epochs=(62, 59, 59, 59, 59), workers=2, others=17.0)
    text = comparison.verdict(baseline, workers)
    assert "About the same speed: 0.99x" in text
    assert "Not a fair measure" not in text
    assert "Other processes took 3% of the CPU during the training of yours (17 core-seconds " \
        "in 298 s on 2 cores): it could have been up to 6% faster, which would tip this close " \
        "call to a speed-up of at most 1.05x." in text
    # The same share beside a clear verdict that it could undo is flagged.
    slow = times("yours", epochs=(62, 63, 63, 63, 63), workers=2, others=17.0)
    assert "Not a fair measure" in comparison.verdict(baseline, slow)


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


# --- notebook 13, headless --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_notebook_13_shows_one_set_of_figures(tmp_path, kernel_name):
    """Notebooks 00 and 13 headless, the solution as the learner's script: the ratio printed is
    the table's, the plot's times are each run's times since its launch (speed's time to an
    accuracy), a bar per run of the time's parts, and the figures beside make bench's."""
    from test_notebooks import execute, stop_tensorboards_under, workbook_copy
    from workbook.paths import REPO

    notebooks = workbook_copy(tmp_path, REPO / "solutions" / "fashion_mnist_solution.py")
    final = "13_run_distributed.ipynb"
    import nbformat

    notebook = nbformat.read(notebooks / final, as_version=4)
    # What the plot shows, read from the figure the notebook drew, and what the runs say.
    notebook.cells.append(nbformat.v4.new_code_cell(
        "import json\n"
        "print('PLOTTED', json.dumps([[float(x) for x in l.get_xdata()] for l in "
        "curves.lines if len(l.get_xdata()) and l.get_linestyle() != ':']))\n"
        "print('LAUNCH ENDS', json.dumps([[e / 60 for e in r.launch_ends] for r in runs]))\n"
        "print('TABLE RATIO', comparison.table(runs, one_worker).iloc[1, -1])"
    ))
    nbformat.write(notebook, notebooks / final)
    try:
        execute(notebooks / "00_welcome.ipynb", kernel_name)
        executed = execute(notebooks / final, kernel_name)
    finally:
        stop_tensorboards_under(tmp_path)
    outputs = [output for cell in executed.cells if cell.cell_type == "code"
               for output in cell.get("outputs", [])]
    shown = "\n".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    shown += "\n".join(o.get("data", {}).get("text/plain", "") for o in outputs)
    # The verdict first: its first lines are the comparisons, the detail folded below them.
    glance = next(o["data"]["text/html"] for o in outputs
                  if "workbook-glance" in o.get("data", {}).get("text/html", ""))
    first = glance.split("<details>")[0]
    assert first.count("<p ") in (2, 3) and "Against 1 worker (reference)" in first
    assert "Where the time went, over" in glance.split("<details>")[1]
    printed = float(re.search(r"Speed-up, training time of the reference / yours "
                              r"\(over \d+ epochs?\): ([\d.]+)", shown).group(1))
    assert float(re.search(r"TABLE RATIO ([\d.]+)", shown).group(1)) == pytest.approx(
        printed, abs=0.006)
    plotted = json.loads(re.search(r"PLOTTED (\[.*\])", shown).group(1))
    launch_ends = json.loads(re.search(r"LAUNCH ENDS (\[.*\])", shown).group(1))
    assert len(plotted) == 3, "reference, your workers and the baseline"
    assert plotted == [pytest.approx(ends) for ends in launch_ends]
    assert "No baseline has finished yet" not in shown
    assert re.search(r"A (slow-down|speed-up)|About the same speed", shown)
    assert "Images/s of the steps:" in shown  # how to read the bars, in the runs' numbers
    assert "Where the time went, over" in shown  # the parts, from the script's step_seconds
    assert "1 worker (reference) (1 worker pinned to" in shown  # each run's hardware is named
    assert "Your baseline (notebook 00) took" in shown  # estimates from the learner's runs
    assert "Estimate from your 2 workers' own pace" in shown
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 2, "the bars of the time's parts and the accuracy curves"
    assert any("make bench (median [min-max])" in o.get("data", {}).get("text/plain", "")
               for o in outputs)


def test_a_figure_without_verdict_is_flagged_only_when_others_could_cost_a_tenth(tmp_path):
    """Notebook 19's rule: a note with the share for a little contention, 'Not a fair measure'
    only when the worst case (a core-second per second) reaches 10% of the training."""
    run = comparison.read_run(a_run(tmp_path / "r", [60.0, 50.0]))
    assert comparison.contention_note(run) is None  # no samples
    run.others_core_seconds = 0.5
    assert comparison.contention_note(run) is None
    run.others_core_seconds = run.training * 0.05
    note = comparison.contention_note(run)
    assert note.startswith("Other processes took") and "up to 5% higher" in note
    run.others_core_seconds = run.training * 0.2
    assert comparison.contention_note(run).startswith("Not a fair measure")


def test_figures_beside_the_benchmarks_are_written_as_the_bench_writes_them():
    """Whole images/s and seconds, efficiency to 0.01, and '-' for a figure a run doesn't have
    (a 2-epoch reference never reaches 90%), not '1118.00' or 'NaN'."""
    from workbook.paths import REPO

    baseline = times("baseline", epochs=(60, 59, 59, 59, 59), speed=1118.0,
                     accuracy=[0.8, 0.85, 0.88, 0.905, 0.91])
    reference = times("reference", epochs=(90, 90), speed=668.0, share=1)
    workers = times("yours", epochs=(62, 59, 59, 59, 59), workers=2, speed=1090.0,
                    accuracy=[0.8, 0.85, 0.88, 0.905, 0.91])
    table = estimates.beside_bench(
        {"reference": reference, "distributed": workers, "baseline": baseline},
        REPO / "bench" / "results")
    mine = table["yours"].tolist()
    assert all(isinstance(value, str) for value in mine)
    assert "1118" in mine and "1090" in mine and "0.82" in mine
    assert mine[-1] == "-"  # the reference's time to 90%
    assert not any("." in value for value in mine if value not in ("0.82",))


def test_the_parts_table_says_how_many_epochs_each_run_measured():
    """The verdict projects the 2-epoch reference to 5 epochs; the parts table shows what was
    measured, and says so with each run's epochs."""
    reference = times("reference", epochs=(100, 90), steps=[95, 85])
    workers = times("yours", epochs=(62, 59, 59, 59, 59), workers=2, steps=[58, 56, 56, 56, 56])
    table = comparison.parts_table([reference, workers])
    assert table.loc["reference", "epochs"] == 2 and table.loc["yours", "epochs"] == 5
    assert table.loc["reference", "training steps"] == 170.0  # 2 epochs, not projected
    unmeasured = times("no step times", epochs=(100, 90))  # parts unknown
    shown = comparison.parts_table([reference, unmeasured]).loc["no step times"]
    assert shown["epochs"] == 2 and set(shown.drop("epochs")) == {"-"}


def test_the_reference_estimate_counts_one_worker_faster_than_each_of_two():
    """A walk: the estimate said 4.9 min for a reference that took 3.8, as if one worker
    trained at half the 2 workers' pace. With the benchmark's efficiency it is N x a worker's
    epoch x that efficiency; without a benchmark, N x at most."""
    from workbook.paths import REPO

    workers = times("yours", epochs=(62, 58, 58, 58, 58), workers=2,
                    steps=[58, 55, 55, 55, 55])  # 20 s start-up, 10 s after training
    efficiency = estimates.bench_figures(REPO / "bench" / "results")[
        "scaling efficiency, 2 workers"][0]
    # Steps at the later epochs' pace, 275 s, and 16 s between them; the first epoch's extra 3 s.
    worker_epoch = (275 + 16) / 5
    expected = 20 + 3 + (2 * worker_epoch * efficiency) * 2 + 10  # 2 epochs
    text = estimates.estimate_reference(workers, 2, REPO / "bench" / "results")
    assert f"about {expected / 60:.1f} min for 2 epochs" in text
    assert f"x {efficiency:.2f}, the scaling efficiency" in text
    assert "at most" in estimates.estimate_reference(workers, 2)


# --- the verdict at a glance (notebook 13) ------------------------------------------------------


def glance_runs():
    ref = times("1 worker (reference)", epochs=(80, 60), steps=(60, 50), speed=1130)
    yours = times("your workers", epochs=(55, 35, 35, 35, 35), workers=2,
                  steps=(40, 28, 28, 28, 28), speed=1736)
    base = times("the baseline (notebook 00)", epochs=(50, 35, 35, 36, 36), share=None,
                 steps=(35, 30, 30, 30, 30), speed=1780)
    return ref, yours, base


def test_the_verdict_first_a_short_line_per_comparison_then_the_detail_folded():
    from workbook.glance import WIDTH, glance

    ref, yours, base = glance_runs()
    shown = glance(ref, yours, base)
    assert len(shown.lines) == 2 and not shown.flags
    ratio = speed_up(ref, yours)
    assert shown.lines[0].startswith(f"Against 1 worker (reference): {ratio:.2f}x as fast.")
    assert "What mattered: the training steps" in shown.lines[0]
    assert "(1,736 against 1,130 images/s)" in shown.lines[0]
    assert shown.lines[1].startswith(
        f"Against the baseline (notebook 00): about the same ({speed_up(base, yours):.2f}x)")
    assert all(len(text) < 160 for text in shown.lines)  # a glance: two short sentences
    page = shown._repr_html_()
    top, folded = page.split("<details>")
    assert top.count("<p ") == 2 and "Scaling efficiency" in folded
    # Every sentence of the full verdicts is in the fold, none is lost.
    for sentence in comparison.verdict(ref, yours).split("\n"):
        assert html_escape(sentence) in folded
    # As text: wrapped at word boundaries, never inside a word.
    words = set(str(shown).split())
    for text in shown.lines:
        assert set(text.split()) <= words
    assert max(len(row) for row in str(shown).splitlines()) <= WIDTH


def html_escape(text):
    import html

    return html.escape(text)


def test_a_slow_down_its_reason_and_an_unfair_measure_come_first():
    from workbook.glance import glance

    base = times("baseline", epochs=(50, 35), share=None, steps=(35, 30), speed=1780)
    slow = times("your workers", epochs=(95, 45), workers=2, steps=(40, 28), speed=1736,
                 others=300.0)
    shown = glance(base, slow)
    assert shown.lines[0].startswith("Against baseline: a slow-down, ")
    assert "What mattered: the time outside the steps, 59 s more" in shown.lines[0]
    assert len(shown.flags) == 1 and shown.flags[0].startswith(
        "Not a fair measure: other processes took enough CPU during your workers to change")
    both = glance(times("ref", others=300.0), slow, base)  # each flagged once, in one line
    assert len(both.flags) == 1 and "during ref and your workers" in both.flags[0]
    assert "Not a fair measure" in shown._repr_html_().split("<details>")[0]


def test_how_to_read_the_bars_gives_each_runs_numbers():
    from workbook.glance import how_to_read

    ref, yours, base = glance_runs()
    text = str(how_to_read([ref, yours, base], yours, ref))
    assert "your workers' steps went 1.54x as fast as the reference's (at most 2x)" in " ".join(
        text.split())
    flat = " ".join(text.split())
    assert "1 worker (reference) 15.0 s per epoch, your workers 8.6 s per epoch" in flat
    assert "twice as fast" not in flat


def test_model_fits_end_is_measured_and_left_out_of_the_reference_estimate(tmp_path):
    """Issue 31: 20 s between the last epoch's end and model.fit's return (tf.data's autotuner
    thread, measured per rank) were copied into the reference's estimate, 25% high."""
    from workbook.paths import REPO

    folder = a_run(tmp_path / "workers", [62, 58, 58, 58, 58], after=31.7,
                   step_seconds=[58, 55, 55, 55, 55], record={"workers": 2})
    log = folder / "horovodrun.log"
    log.write_text(log.read_text().replace('{"test_accuracy": 0.8}',
                                           '{"test_accuracy": 0.8, "train_seconds": 314.1}'))
    workers = comparison.read_run(folder, "your workers")
    assert comparison.fit_end_wait(workers) == pytest.approx(314.1 - 294.0)
    text = estimates.estimate_reference(workers, 2, REPO / "bench" / "results")
    assert "Your workers also waited 20 s at the end of model.fit" in text
    minutes = float(re.search(r"about ([\d.]+) min", text).group(1))
    without = estimates.estimate_reference(
        comparison.read_run(a_run(tmp_path / "quick", [62, 58, 58, 58, 58], after=31.7 - 20.1,
                                  step_seconds=[58, 55, 55, 55, 55], record={"workers": 2})),
        2, REPO / "bench" / "results")
    assert f"about {minutes:.1f} min" in without  # the wait is not copied
    assert comparison.fit_end_wait(times()) is None  # no folder, no RESULT: not known


def test_where_a_running_baseline_is_and_when_it_ends_from_its_own_pace(tmp_path):
    from workbook import estimates

    folder = a_run(tmp_path / "baseline", [70.0, 50.0], start_up=12.0)
    run_json = json.loads((folder / "run.json").read_text())
    del run_json["ended"], run_json["ok"]
    (folder / "run.json").write_text(json.dumps(run_json))
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
    from workbook.glance import WIDTH, say

    text = estimates.expect_like_baseline(times("baseline", share=None)) + "\nA second one."
    shown = say(text)
    assert shown._repr_html_().count("<p ") == 2
    assert str(shown).split() == text.split()  # the same words, none cut
    assert max(len(row) for row in str(shown).splitlines()) <= WIDTH
    assert str(say("")) == "" and say("")._repr_html_() == ""
