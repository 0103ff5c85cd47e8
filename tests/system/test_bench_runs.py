"""The benchmarks for real: every one of them runs on tiny settings and writes a well-formed JSON
file and a PNG (marked bench: `make bench-check`), SIGTERM on a benchmark stops horovodrun and
its workers, and a benchmarked run names a busy neighbour but not itself (a 40 s CPU loop beside
it). The measured numbers themselves are not asserted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from bench import grading
from bench.processes import run_timed
from bench.verdicts import TINY_FILES
from processes import describe, kill_group, marked, new_marker, stop_marked
from processes import python_c_plan as python_c
from workbook.bench_results import BenchResult
from workbook.facts import LAST_STEP
from workbook.facts import SOLUTION_FILE_NAME as SOLUTION_NAME
from workbook.paths import REPO
from workbook.runner import contention

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ROUNDING_S = 0.1  # bench/accuracy.py rounds a curve's seconds and a run's wall time to 0.1 s


# About 6 minutes of measuring on 2 cores: `make bench-check` runs it, `make test` does not (the
# pictures of every committed result are drawn in tests/unit/test_bench.py).
@pytest.mark.bench
@pytest.mark.timeout(2000)
def test_every_benchmark_runs_tiny_and_writes_json_and_png(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "bench", "all", "--tiny", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("scaling", "accuracy", "overhead", "grading", "verdicts", "run_profile"):
        document = BenchResult.read(tmp_path / f"{name}.json")
        assert document.benchmark == name
        assert document.machine["cores"] >= 1 and document.machine["tensorflow"]
        assert (tmp_path / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE)
    summary = BenchResult.read(tmp_path / "scaling.json").summary
    assert all(c["images_per_second"]["median"] > 0 for c in summary["configs"].values())
    assert summary["scaling_efficiency"]["2"]["median"] > 0
    assert summary["machine_ceiling"]["2"]["median"] > 0

    runs = BenchResult.read(tmp_path / "accuracy.json").measurements
    # One repetition: the reference side by side (two runs), the distributed run, the baseline.
    assert sorted(run["config"] for run in runs) == [
        "baseline",
        "distributed",
        "reference",
        "reference",
    ]
    for run in runs:
        assert [p["epoch"] for p in run["curve"]] == [1, 2]
        # What holds at any load: epoch 2's point after epoch 1's, both within the run. Each
        # figure is rounded to 0.1 s on its own (the points from TensorBoard's wall times, the
        # run's from its clock), so the last point may pass the run's end by that rounding.
        first, second = (point["seconds"] for point in run["curve"])
        assert 0 < first < second <= run["wall_seconds"] + ROUNDING_S
        assert isinstance(run["neighbours"], list)

    overhead = BenchResult.read(tmp_path / "overhead.json").summary
    for name in ("python", "horovodrun -np 1", "runner (np=auto)"):
        # Both repetitions trained (a resumed run would show no first step).
        assert overhead[name]["first_step_seconds"]["n"] == 2
        assert overhead[name]["first_step_seconds"]["median"] > 0

    grades = BenchResult.read(tmp_path / "grading.json")
    assert grades.summary["grades_equal"], grades.summary["mismatches"]
    scores = grades.measurements["scores"]
    assert len(scores) == len(grading.TINY_KINDS)
    by_kind = dict(zip(grading.TINY_KINDS, (scores[s]["batch"] for s in sorted(scores))))
    # Stopped after step N: N.
    assert (by_kind[grading.SOLUTION], by_kind[grading.STARTER]) == (LAST_STEP, 0)
    assert by_kind[grading.SYNTAX_ERROR] == by_kind[grading.NO_SCRIPT] == 0
    assert 0 < by_kind[grading.LINE_DELETED[0]] < LAST_STEP  # one Horovod line deleted
    verdicts = BenchResult.read(tmp_path / "verdicts.json").summary
    steps = TINY_FILES * LAST_STEP
    assert verdicts["scripts"] == TINY_FILES and verdicts["steps"] == steps
    assert sum(verdicts["reading"].values()) == steps
    assert sum(verdicts["decided_by"].values()) == steps
    # With runs, each script of the chain scores its step, decided by what it did.
    assert grades.summary["runs_score_the_chains_steps"], grades.summary["runs_wrong"]
    profile = BenchResult.read(tmp_path / "run_profile.json").summary
    assert profile["all_passed"] and profile["wall_seconds"]["median"] > 0
    # Both launches seen by the probe, each part of each, and the rest outside.
    assert {
        "launch 1: first training step",
        "launch 2: TensorFlow's import",
        "launch, start, exit, checks",
    } <= set(profile["parts_seconds"])


TEST_MARKER = "WORKBOOK_TEST_BENCH_STOP"  # in the environment of every process the test starts


@pytest.mark.timeout(400)
def test_a_benchmark_stopped_by_sigterm_stops_horovodrun_and_its_workers(tmp_path):
    """`kill` (or a scheduler's time limit) on the benchmark's own process: its runner stops
    the run it is in, descendants included, and the benchmark says so and exits with 130."""
    marker = new_marker()
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench", "scaling", "--tiny", "--out", str(tmp_path)],
        cwd=REPO,
        env={**os.environ, TEST_MARKER: marker},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not _horovod_workers(marker) and time.monotonic() < deadline:
            assert bench.poll() is None, bench.communicate()
            time.sleep(0.5)
        assert _horovod_workers(marker), "no horovodrun worker started in 240 s"
        bench.send_signal(signal.SIGTERM)
        _, err = bench.communicate(timeout=60)
        assert bench.returncode == 130, err[-3000:]
        assert re.search(
            r"stopped by SIGTERM in run \S+, its [1-9]\d* process(es)? stopped", err
        ), err
        left = marked(TEST_MARKER, marker)
        assert not left, describe(left)
    finally:
        if bench.poll() is None:
            kill_group(bench)
        stop_marked(TEST_MARKER, marker, "test_a_benchmark_stopped_by_sigterm")


def _horovod_workers(marker: str) -> list:
    """The marked processes of a horovodrun run that are its workers (training already)."""
    found = []
    for process in marked(TEST_MARKER, marker):
        try:
            parents = " ".join(" ".join(p.cmdline()) for p in process.parents())
            if SOLUTION_NAME in " ".join(process.cmdline()) and "horovodrun" in parents:
                found.append(process)
        except psutil.Error:
            pass
    return found


def test_a_benchmarked_run_names_a_busy_neighbour_but_not_itself(tmp_path, monkeypatch):
    # On a machine busy with other tests the loop may get less than half a core: count less.
    monkeypatch.setattr(contention, "BUSY_CORE_SHARE", 0.1)
    monkeypatch.setattr(contention, "MENTION_AT_MOST", 1000)
    # ...and a loop starved by them in one sample or two is named all the same.
    monkeypatch.setattr(contention, "MENTION_AFTER_S", 4.0)
    loop = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 40\nwhile time.time() < end: pass"]
    )
    try:
        # The run itself is busy too (a second loop, for 12 s: the mention needs 4 s of it).
        timed = run_timed(
            python_c(
                "import time\nend = time.time() + 12\nwhile time.time() < end: pass",
                tmp_path,
                timeout=120,
            )
        )
    finally:
        loop.kill()
        loop.wait()
    assert any(f"(pid {loop.pid}) used" in line for line in timed.neighbours), timed.neighbours
    assert not any("+ 12" in line for line in timed.neighbours)  # the run's own loop is not one
    assert timed.others_mean_share > 0.1
