"""Horovod's timeline for real: recorded through the runner, of a 2-worker and a 1-worker run of
the solution, read and drawn. The where_does_the_time_go notebook draws it headless in
tests/system/test_notebooks_run.py; the reading of event lists: tests/unit/test_timeline.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workbook.timeline import plot_steps, read_timeline, summary

QUICK = (
    "--data-dir ../data/sample --train-images 1024 --test-images 256 --depth 10 --width 1 "
    "--epochs 2 --steps-per-epoch 16"
)


@pytest.mark.timeout(900)
def test_a_real_two_worker_timeline(tmp_path):
    import matplotlib

    from workbook.paths import NOTEBOOKS_DIR
    from workbook.run_times import read_run
    from workbook.runner import horovodrun

    matplotlib.use("Agg")
    script = Path("..") / "solutions" / "fashion_mnist_solution.py"
    common = dict(cwd=NOTEBOOKS_DIR, logs_root=tmp_path, quiet=True, timeout=600)
    two = horovodrun(f"{script} {QUICK}", np=2, share=1, timeline=True, run_name="two", **common)
    assert two.ok, two.error
    timeline = read_timeline(two.timeline_path)
    assert timeline.ranks == [0, 1]
    steps = timeline.steps()
    assert len(steps) == 2 * 16 // 2 - 1  # 8 steps per epoch and worker, the first left out
    per_step = len(timeline.gradients()) // (len(steps) + 1)
    assert per_step >= 10 and len(timeline.gradients()) == per_step * (len(steps) + 1)
    # The broadcast after the first step and the end of epoch 1 are seen as other work.
    assert [s.number for s in steps if s.other_work] == [2, 9]
    for step in steps:
        assert step.begin < step.agreed <= step.done
        for rank in (0, 1):
            assert sum(step.phases(rank).values()) == pytest.approx(step.seconds)
            assert min(step.phases(rank).values()) >= 0
    found = summary(timeline)
    assert found["steps"] == len(steps) - 2 and 0.1 < found["gradient_megabytes"] < 2
    axes = plot_steps(timeline)
    assert len(axes) == 2 and len(axes[0].patches) == 3 * len(steps)
    # The same run, timed from its TensorBoard logs and run.json.
    run = read_run(two.tensorboard_dir)
    assert run.epochs == [0, 1] and run.workers == 2 and run.cores_per_worker == 1
    assert 0 < run.start_up and 0 < run.after_training
    assert run.training <= two.metrics["train_seconds"] + 1  # model.fit holds the epochs
    # A lone worker allreduces no gradient: its timeline has nothing to draw.
    one = horovodrun(
        f"{script} {QUICK}", np=1, share="auto", timeline=True, run_name="one", **common
    )
    assert one.ok, one.error
    assert read_timeline(one.timeline_path).gradients() == []
    lone = read_run(one.tensorboard_dir)
    assert lone.workers == 1 and "pinned to" in lone.hardware
