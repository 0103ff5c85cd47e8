"""The runner's pinning launcher and its record with real processes: workbook/runner/pin_cores.py
really changes the process's affinity before the script starts (and refuses a bad count); every
run leaves run.json (start, end, layout, busy neighbours), a process that keeps a core busy
during a run is named in its result, and runs of one group know each other's processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from workbook.runner import contention, start_in_background
from workbook.runner.command import PIN_LAUNCHER
from workbook.runner.contention import ContentionMonitor
from workbook.runner.record import ContentionRecord, RunRecord

AFFINITY = Path("/proc/self/status").exists() and hasattr(os, "sched_getaffinity")


def a_script(folder: Path, text: str = "import argparse  # --log-dir\n", name="train.py") -> Path:
    path = folder / name
    path.write_text(text)
    return path


# --- layouts ----------------------------------------------------------------------------------


SHOW_AFFINITY = """\
import json, os, sys
print(json.dumps({"cores": sorted(os.sched_getaffinity(0)), "path0": sys.path[0],
                  "argv": sys.argv, "file": __file__}))
"""


@pytest.mark.skipif(not AFFINITY, reason="needs Linux's sched_setaffinity")
@pytest.mark.parametrize("rank", ["0", "1"])
def test_the_launcher_pins_the_script_before_it_starts(tmp_path, rank):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs 2 cores")
    script = a_script(tmp_path, SHOW_AFFINITY, "show.py")
    env = {**os.environ, "HOROVOD_LOCAL_RANK": rank}
    done = subprocess.run(
        [sys.executable, str(PIN_LAUNCHER), "1", str(script), "--flag", "x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["cores"] == [allowed[int(rank)]]
    # The script runs as `python show.py --flag x` would.
    assert seen["argv"] == [str(script), "--flag", "x"]
    assert seen["path0"] == str(tmp_path) and seen["file"] == str(script)


def test_the_launcher_refuses_a_bad_count(tmp_path):
    done = subprocess.run(
        [sys.executable, str(PIN_LAUNCHER), "none", "x.py"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "usage: python pin_cores.py CORES_PER_WORKER" in done.stderr


def busy_loop(seconds: float) -> subprocess.Popen:
    """A process outside any run that keeps one core busy."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass",
        ]
    )


def test_the_monitor_names_a_busy_neighbour_and_not_the_runs_own(tmp_path, monkeypatch):
    # On a machine busy with other tests a loop may get less than half a core: count less.
    monkeypatch.setattr(contention, "BUSY_CORE_SHARE", 0.1)
    # ...and other tests' trainings may be busier than the loop: name them all.
    monkeypatch.setattr(contention, "MENTION_AT_MOST", 1000)
    neighbour, own = busy_loop(30), busy_loop(30)
    try:
        monitor = ContentionMonitor(interval=0.2, mention_after=1.0)
        started = time.monotonic()
        while time.monotonic() - started < 3:
            now = time.monotonic()
            if monitor.due(now):
                monitor.sample(now, {own.pid})
            time.sleep(0.05)
    finally:
        neighbour.kill(), own.kill()
        neighbour.wait(), own.wait()
    named = {p.pid: p for p in monitor.busy_processes()}
    assert neighbour.pid in named and own.pid not in named
    assert named[neighbour.pid].command.startswith("python -c")
    assert named[neighbour.pid].mean_share > 0.1
    assert any(f"(pid {neighbour.pid}) used" in line for line in monitor.findings())
    assert neighbour.pid in [p.pid for p in ContentionRecord.of(monitor).busy_processes]


def test_every_run_leaves_its_record(tmp_path):
    a_script(tmp_path, "import time\ntime.sleep(1)\nprint('RESULT {\"epochs\": 1}')\n")
    before = time.time()
    run = start_in_background(
        "train.py",
        np=1,
        launcher="python",
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        run_name="rec",
        log_dir=False,
    )
    result = run.result(timeout=120)
    record = RunRecord.read(tmp_path / "logs" / "rec")
    assert before <= record.started < record.ended <= time.time()
    assert record.ended - record.started >= 1.0
    assert (result.started_at, result.ended_at) == (record.started, record.ended)
    assert record.layout == result.layout and record.launcher == "python"
    assert record.ok is True and record.exit_code == 0
    assert record.busy_others == result.busy_others


def test_runs_of_one_group_know_each_others_processes(tmp_path):
    """RunOptions.group: the benchmarks' side-by-side runs are not each other's contention."""
    from workbook.runner.execute import _companions

    sleep = "import time; time.sleep(60)  # {}"
    runs = [
        start_in_background(
            [sys.executable, "-c", sleep.format(name)],
            np=1,
            launcher="python",
            logs_root=tmp_path,
            run_name=name,
            log_dir=False,
            group=group,
        )
        for name, group in [("a", "pair"), ("b", "pair"), ("c", None)]
    ]
    try:
        deadline = time.monotonic() + 30
        while len(_companions(runs[0].plan)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        commands = {" ".join(psutil.Process(pid).cmdline()) for pid in _companions(runs[0].plan)}
        assert commands == {f"{sys.executable} -c {sleep.format(n)}" for n in "ab"}
        assert runs[0].plan.group_marker == ("WORKBOOK_RUN_GROUP", "pair")
        assert runs[2].plan.group_marker is None and _companions(runs[2].plan) == set()
    finally:
        for run in runs:
            run.stop()
