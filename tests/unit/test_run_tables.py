"""The run_distributed notebook's tables, plots and TensorBoard chart (workbook.run_tables): the
same figures as the verdict's. The notebook run headless:
tests/system/test_notebooks_run.py."""

from __future__ import annotations

import pytest

from run_folders import a_run, times
from workbook import run_tables, run_times
from workbook.run_times import speed_up

# --- one ratio everywhere ---------------------------------------------------------------------


def test_the_ratio_the_table_the_plot_and_tensorboard_agree(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    reference = run_times.read_run(a_run(tmp_path / "ref", [100.0, 100.0]), "reference")
    mine = run_times.read_run(a_run(tmp_path / "mine", [70.0, 55.0]), "mine")
    ratio = speed_up(reference, mine)
    assert ratio == pytest.approx(200 / 125)
    table = run_tables.table([reference, mine], reference)
    assert table.loc["mine", "training speed vs reference"] == round(ratio, 2)
    assert table.loc["mine", "training (s)"] == 125.0
    assert table.loc["mine", "images/s (steps, epochs after the first)"] == 100
    ax = run_tables.plot([reference, mine])
    # The plot's time is speed's time to an accuracy: since the launch, start-up included.
    assert list(ax.lines[1].get_xdata()) == pytest.approx([90 / 60, 145 / 60])
    folder = run_tables.write_tensorboard_timing(mine)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    written = [(e.step, e.value) for e in events.Scalars(run_tables.TIMING_TAG)]
    assert written == [(0, pytest.approx(70 / 60)), (1, pytest.approx(125 / 60))]
    run_tables.write_tensorboard_timing(mine)  # again: rewritten, not appended
    assert len(list(folder.iterdir())) == 1


def test_the_table_shows_a_dash_for_a_missing_figure_and_whole_images_per_second(tmp_path):
    reference = run_times.read_run(a_run(tmp_path / "ref", [100.0, 100.0]), "reference")
    mine = run_times.read_run(a_run(tmp_path / "mine", [70.0, 55.0], speed=[99.6, 99.6]), "mine")
    table = run_tables.table([reference, mine], reference)
    assert table.loc["mine", "images/s (steps, epochs after the first)"] == 100
    assert str(table.loc["mine", "images/s (steps, epochs after the first)"]) == "100"
    assert (table["to 90%, from the launch (s)"] == "-").all()  # 0.6 accuracy at best
    assert "NaN" not in table.to_string() and "nan" not in table.to_html()


def test_the_parts_table_says_how_many_epochs_each_run_measured():
    """The verdict projects the 2-epoch reference to 5 epochs; the parts table shows what was
    measured, and says so with each run's epochs."""
    reference = times("reference", epochs=(100, 90), steps=[95, 85])
    workers = times("yours", epochs=(62, 59, 59, 59, 59), workers=2, steps=[58, 56, 56, 56, 56])
    table = run_tables.parts_table([reference, workers])
    assert table.loc["reference", "epochs"] == 2 and table.loc["yours", "epochs"] == 5
    assert table.loc["reference", "training steps"] == 170.0  # 2 epochs, not projected
    unmeasured = times("no step times", epochs=(100, 90))  # parts unknown
    shown = run_tables.parts_table([reference, unmeasured]).loc["no step times"]
    assert shown["epochs"] == 2 and set(shown.drop("epochs")) == {"-"}
