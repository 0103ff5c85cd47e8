"""The runner's shares of the cores, its timeline option, and its record, planned in this process.

- share="auto" gives one worker what a worker of np="auto" gets (threads and cores), pinned;
- np="auto" pins each worker to its own block of cores through workbook/runner/pin_cores.py;
- timeline=True asks horovodrun for Horovod's timeline, without the response cache.

The launcher, the monitor and the record with real processes:
tests/smoke/test_runner_shares_processes.py.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from workbook.runner import contention
from workbook.runner.command import HOROVODRUN, PIN_LAUNCHER, plan_run
from workbook.runner.contention import ContentionMonitor, short_command
from workbook.runner.layout import auto_layout, pins_cores, share_layout
from workbook.runner.pin_cores import cores_of_worker, local_rank

needs_horovodrun = pytest.mark.skipif(
    not (Path(sys.executable).parent / "horovodrun").exists(), reason="horovodrun not installed"
)


def a_script(folder: Path, text: str = "import argparse  # --log-dir\n", name="train.py") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def plan(tmp_path, command="train.py", **options):
    return plan_run(
        command,
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        run_name="run",
        cores=options.pop("cores", 2),
        gpus=options.pop("gpus", 0),
        **options,
    )


# --- layouts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "workers, share, cores, threads, text",
    [
        (1, "auto", 2, 1, "1 worker x 1 thread pinned to 1 of 2 CPU cores"),
        (1, "auto", 8, 4, "1 worker x 4 threads pinned to 4 of 8 CPU cores"),
        (
            2,
            "auto",
            8,
            4,
            "2 workers x 4 threads on 8 CPU cores, each pinned to 4 cores of its own",
        ),
        (1, 3, 8, 3, "1 worker x 3 threads pinned to 3 of 8 CPU cores"),
        (1, "auto", 1, 1, "1 worker x 1 thread on 1 CPU core"),  # all of one core: no pinning
    ],
)
def test_a_share_is_what_one_auto_worker_gets(workers, share, cores, threads, text):
    layout = share_layout(workers, share, cores, gpus=0)
    assert layout.threads == threads
    if share == "auto":
        assert layout.threads == auto_layout(cores, 0).threads
    assert layout.describe() == text
    assert layout.env()["TF_NUM_INTRAOP_THREADS"] == str(threads)


def test_a_share_that_does_not_fit_is_refused():
    with pytest.raises(ValueError, match="3 workers x 1 core do not fit in the 2 CPU cores"):
        share_layout(3, "auto", 2, gpus=0)


def test_gpus_and_remote_hosts_are_not_pinned():
    assert not pins_cores(auto_layout(16, 4))  # one GPU each: the GPU is the device
    assert share_layout(1, "auto", 16, gpus=4).pinned is False
    assert pins_cores(auto_layout(2, 0)) and pins_cores(auto_layout(8, 0))
    assert not pins_cores(auto_layout(1, 0))  # one worker on the only core


@needs_horovodrun
def test_auto_and_share_plans_start_the_script_through_the_pinning_launcher(tmp_path):
    script = a_script(tmp_path)
    auto, one = plan(tmp_path, np="auto"), plan(tmp_path, np=1, share="auto")
    assert auto.argv[auto.argv.index(sys.executable, len(HOROVODRUN)) :][:4] == [
        sys.executable,
        str(PIN_LAUNCHER),
        "1",
        str(script),
    ]
    assert (one.np, one.layout.threads, one.layout.pinned) == (1, 1, True)
    assert f"-np 1 python {PIN_LAUNCHER} 1 train.py" in one.display_command
    assert one.env["TF_NUM_INTRAOP_THREADS"] == "1"
    explicit = plan(tmp_path, np=2)  # a given -np is left as the learner asked
    assert str(PIN_LAUNCHER) not in explicit.argv
    python = plan(tmp_path, np=1, launcher="python", share="auto")
    assert python.argv[:3] == [sys.executable, str(PIN_LAUNCHER), "1"]
    with pytest.raises(ValueError, match="without -H"):
        plan(tmp_path, command="-H localhost:2 train.py", share="auto")


@needs_horovodrun
def test_timeline_option(tmp_path):
    a_script(tmp_path)
    planned = plan(tmp_path, np="auto", timeline=True)
    path = tmp_path / "logs" / "run" / "timeline.json"
    assert planned.timeline_path == path
    at = planned.argv.index("--timeline-filename")
    assert planned.argv[at + 1] == str(path) and at < planned.argv.index(
        sys.executable, len(HOROVODRUN)
    )
    assert "--timeline-filename logs/run/timeline.json" in planned.display_command
    assert planned.env["HOROVOD_CACHE_CAPACITY"] == "0"
    assert "HOROVOD_CACHE_CAPACITY" not in plan(tmp_path, np="auto").env
    given = plan(tmp_path, command="--timeline-filename mine.json train.py", np="auto")
    assert given.timeline_path == tmp_path / "mine.json"
    assert given.argv.count("--timeline-filename") == 1
    with pytest.raises(ValueError, match="needs launcher='horovodrun'"):
        plan(tmp_path, np=1, launcher="python", timeline=True)


def test_local_ranks_and_blocks():
    assert local_rank({"HOROVOD_LOCAL_RANK": "1"}) == 1
    assert local_rank({"OMPI_COMM_WORLD_LOCAL_RANK": "3"}) == 3
    assert local_rank({}) == 0
    assert cores_of_worker({0, 1, 2, 3}, 2, 1) == [2, 3]
    assert cores_of_worker({4, 6}, 1, 1) == [6]  # the cores it may use, not 0..N
    assert cores_of_worker({0, 1}, 1, 5) == [0, 1]  # no such block: all of them


def test_a_quiet_monitor_says_nothing():
    monitor = ContentionMonitor(interval=0.2, mention_after=1.0)
    assert monitor.findings() == [] and monitor.busy_processes() == []


def test_short_commands():
    assert short_command(["/venv/bin/python3.11", "/a/b/train.py", "--epochs", "5"], "x") == (
        "python train.py --epochs 5"
    )
    assert short_command(["horovodrun", "-np", "2", "python", "x.py", "--a"], "x") == (
        "horovodrun -np 2 python x.py ..."
    )
    assert short_command([], "kworker") == "kworker"


def test_only_the_busiest_neighbours_are_named(monkeypatch):
    monitor = ContentionMonitor(mention_after=1.0, cores=2)
    for pid in range(1, 6):
        monitor.busy[pid] = contention.BusyProcess(pid, f"job{pid}", 10.0, 10.0 * pid / 5)
    monitor.sampled_seconds, monitor.others_core_seconds = 10.0, 30.0
    found = monitor.findings()
    assert found[0] == (
        "other processes took 150% of the CPU (30 core-seconds in the run's 10 s "
        "on 2 cores): up to 100% of its time, as a worker that loses its core "
        "stalls them all"
    )
    assert [line.split("`")[1] for line in found[1:4]] == ["job5", "job4", "job3"]
    assert found[4] == "2 other processes too"


def test_a_short_burst_is_not_contention():
    # The learner's check cells beside the baseline: 12 s at 73% of a core in a 381 s run.
    monitor = ContentionMonitor(mention_after=1.0, cores=2)
    monitor.busy[7] = contention.BusyProcess(7, "python -m ipykernel_launcher", 12.0, 8.8)
    monitor.sampled_seconds, monitor.others_core_seconds = 381.0, 8.8
    assert not monitor.matters() and monitor.findings() == []
    monitor.others_core_seconds = 34.0  # 34 core-seconds of 381 s: up to 9% of the run
    assert monitor.matters() and "up to 9% of its time" in monitor.findings()[0]
