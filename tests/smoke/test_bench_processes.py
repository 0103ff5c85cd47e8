"""The benchmarks' processes: the pinned launcher gives each local rank its own cores, and a
benchmarked run names a busy neighbour but not itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.processes import run_timed
from processes import python_c_plan as python_c
from workbook.runner import contention
from workbook.runner.command import PIN_LAUNCHER


def test_pinned_launcher_gives_each_local_rank_its_own_cores(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os, sys; print(sorted(os.sched_getaffinity(0)), sys.argv[1:])")
    allowed = sorted(os.sched_getaffinity(0))
    for rank in range(min(2, len(allowed))):
        # Under horovodrun the local rank says which cores; separate processes get an index.
        for variable in ("HOROVOD_LOCAL_RANK", "WORKBOOK_CORE_BLOCK"):
            env = {k: v for k, v in os.environ.items() if k != "HOROVOD_LOCAL_RANK"}
            done = subprocess.run(
                [sys.executable, str(PIN_LAUNCHER), "1", str(probe), "--x", "1"],
                capture_output=True, text=True, env={**env, variable: str(rank)}, check=True,
            )
            assert done.stdout.strip() == f"[{allowed[rank]}] ['--x', '1']"


def test_a_benchmarked_run_names_a_busy_neighbour_but_not_itself(tmp_path, monkeypatch):
    # On a machine busy with other tests the loop may get less than half a core: count less.
    monkeypatch.setattr(contention, "BUSY_CORE_SHARE", 0.1)
    monkeypatch.setattr(contention, "MENTION_AT_MOST", 1000)
    # ...and a loop starved by them in one sample or two is named all the same.
    monkeypatch.setattr(contention, "MENTION_AFTER_S", 4.0)
    loop = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 40\n"
                             "while time.time() < end: pass"])
    try:
        # The run itself is busy too (a second loop, for 12 s: the mention needs 4 s of it).
        timed = run_timed(python_c("import time\nend = time.time() + 12\n"
                                   "while time.time() < end: pass", tmp_path, timeout=120))
    finally:
        loop.kill()
        loop.wait()
    assert any(f"(pid {loop.pid}) used" in line for line in timed.neighbours), timed.neighbours
    assert not any("+ 12" in line for line in timed.neighbours)  # the run's own loop is not one
    assert timed.others_mean_share > 0.1


