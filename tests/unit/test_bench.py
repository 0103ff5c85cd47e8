"""The benchmarks: their arithmetic, and (slow) that every one of them runs on tiny settings and
writes a well-formed JSON file and a PNG. The measured numbers themselves are not asserted:
speed targets are reported by the benchmarks, not tested here."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench import accuracy, grading, overhead, readme, results, scaling
from bench.processes import FirstStepConsole, run_timed
from bench.training import Launch
from processes import describe, kill_group, marked, new_marker, stop_marked
from processes import python_c_plan as python_c
from workbook import facts
from workbook.bench_results import BenchResult
from workbook.facts import SOLUTION_FILE_NAME as SOLUTION_NAME
from workbook.facts import parse_result, usable_cores
from workbook.runner import contention
from workbook.runner.command import PIN_LAUNCHER
from grader import check_all
from workbook.paths import REPO

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_summarize_gives_median_and_spread():
    stats = results.summarize([10, 12, 11])
    assert stats == {"n": 3, "median": 11.0, "min": 10.0, "max": 12.0, "spread": round(2 / 11, 4)}
    assert results.summarize([])["median"] is None


def test_cpu_scaling_gives_each_worker_an_equal_share_of_the_cores():
    default, one, two, separate = scaling.launches(cores=2, gpus=0)
    assert not default.horovodrun and default.threads is None
    assert (one.workers, one.threads) == (1, 1) and (two.workers, two.threads) == (2, 1)
    assert one.pinned and two.pinned and two.label == "2 workers, 1 core each"
    assert separate.separate and separate.pinned and (separate.workers, separate.threads) == (2, 1)
    assert [launch.threads for launch in scaling.launches(cores=8, gpus=0)[1:]] == [4, 4, 4]
    assert [launch.workers for launch in scaling.launches(cores=8, gpus=4)] == [1, 2, 3, 4]


@pytest.mark.skipif(usable_cores() < 2, reason="2 workers of 1 core each need 2 cores")
def test_launches_are_planned_by_the_runner(tmp_path):
    """Each benchmark launch starts its workers as the runner's plan_run says, with its options."""
    from workbook.runner import RunOptions, plan_run

    script = tmp_path / "x.py"
    script.write_text("import argparse  # --log-dir\n")
    logs = tmp_path / "logs"

    def plan(launch, args=()):
        return launch.plan(script, list(args), logs / "run")

    two = plan(Launch(2, 1), ["--epochs", "1"])
    horovodrun = str(Path(sys.executable).with_name("horovodrun"))
    assert two.argv == [horovodrun, "--gloo", "-np", "2", sys.executable, str(script),
                        "--epochs", "1", "--log-dir", str(logs / "run")]  # fmt: skip
    assert two.env["TF_NUM_INTRAOP_THREADS"] == "1" and two.env["CUDA_VISIBLE_DEVICES"] == ""
    assert two.env["TF_CPP_MIN_LOG_LEVEL"] == "2" and not two.layout.pinned
    pinned = plan(Launch(2, 1, pinned=True), ["--epochs", "1"])
    assert pinned.layout.pinned
    assert pinned.argv[3:8] == ["2", sys.executable, str(PIN_LAUNCHER), "1", str(script)]
    # The benchmark's 2 pinned workers are what a notebook cell's np=2, share=1 starts.
    cell = plan_run([str(script), "--epochs", "1"], np=2, share=1, gpus=0, run_name="run",
                    logs_root=logs, log_dir=logs / "run")  # fmt: skip
    assert (cell.argv, cell.layout) == (pinned.argv, pinned.layout)

    python = plan(Launch(1, None, horovodrun=False))
    assert python.argv[:2] == [sys.executable, str(script)] and python.launcher == "python"
    assert "TF_NUM_INTRAOP_THREADS" not in python.env or "TF_NUM_INTRAOP_THREADS" in os.environ
    # horovodrun without threads: TensorFlow's own thread defaults, as a plain horovodrun.
    default = plan(Launch(1, None))
    assert default.layout.threads is None and default.argv[1:4] == ["--gloo", "-np", "1"]
    assert Launch(1, None).options(logs / "run") == RunOptions(
        np=1, tf_threads=False, run_name="run", logs_root=logs, log_dir=logs / "run",
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}, gpus=0,
    )  # fmt: skip
    # Each of `separate`'s processes: plain python, pinned to its block of cores.
    separate = plan(Launch(2, 1, horovodrun=False, pinned=True, separate=True))
    assert separate.argv[:4] == [sys.executable, str(PIN_LAUNCHER), "1", str(script)]


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


def test_scaling_efficiency_pairs_runs_of_the_same_repetition():
    configs = scaling.launches(cores=2, gpus=0)
    rates = {(0, 0): 500, (0, 1): 300, (0, 2): 540, (0, 3): 570,
             (1, 0): 520, (1, 1): 250, (1, 2): 480, (1, 3): 490}
    measurements = [
        {"repetition": r, "config": configs[c].label, "images_per_second": rate}
        for (r, c), rate in rates.items()
    ]
    summary = scaling.summarize(configs, measurements)
    efficiency = summary["scaling_efficiency"]["2"]
    assert efficiency["median"] == pytest.approx((540 / 600 + 480 / 500) / 2, abs=1e-4)
    assert summary["configs"][configs[2].label]["images_per_second_per_worker"] == 255
    assert summary["speedup_over_single_process_default"] == pytest.approx(510 / 510)
    # The separate processes: the machine's ceiling, and how much of it Horovod keeps.
    ceiling = summary["machine_ceiling"]["2"]["median"]
    assert ceiling == pytest.approx((570 / 600 + 490 / 500) / 2, abs=1e-4)
    share = summary["horovod_share_of_ceiling"]["2"]["median"]
    assert share == pytest.approx((540 / 570 + 480 / 490) / 2, abs=1e-4)


def test_time_to_accuracy_is_the_first_epoch_at_or_above_the_target():
    points = [{"seconds": 100, "accuracy": 0.85}, {"seconds": 200, "accuracy": 0.9},
              {"seconds": 300, "accuracy": 0.89}]
    assert accuracy.time_to(points, 0.88) == 200
    assert accuracy.time_to(points, 0.95) is None


def test_runner_console_notes_the_first_progress_bar_not_the_epoch_line():
    console = FirstStepConsole()
    console.start(None)
    console.status("running 0:09 | Epoch 1/2")
    assert console.first_step is None
    console.status("running 0:12 |  3/75 [>.......] - ETA: 20s - loss: 2.3")
    assert console.first_step is not None


def test_accuracy_runs_turn_their_order_and_pair_the_reference():
    side_by_side = accuracy.schedule(3, side_by_side=True)
    assert side_by_side == [
        (0, "reference"), (0, "distributed"), (0, "baseline"),
        (1, "baseline"), (1, "distributed"),
        (2, "baseline"), (2, "reference"), (2, "distributed"),
    ]
    alone = accuracy.schedule(2, side_by_side=False)
    assert [name for _, name in alone] == [
        "reference", "distributed", "baseline", "distributed", "baseline", "reference"]


def _accuracy_run(config, to_89, to_90, final):
    return {"config": config, "seconds_to_89": to_89, "seconds_to_90": to_90,
            "final_test_accuracy": final, "wall_seconds": 600.0, "neighbours": []}


def test_accuracy_summary_takes_medians_and_ignores_a_target_most_runs_missed():
    configs = accuracy.launches(cores=2, gpus=0)
    measurements = [
        _accuracy_run("reference", 300, 500, 0.90), _accuracy_run("reference", 320, None, 0.89),
        _accuracy_run("reference", 280, 520, 0.905),
        _accuracy_run("distributed", 200, 250, 0.90), _accuracy_run("distributed", 220, 260, 0.91),
        _accuracy_run("distributed", 240, 300, 0.90),
        _accuracy_run("baseline", 250, None, 0.88), _accuracy_run("baseline", 260, None, 0.89),
        _accuracy_run("baseline", 270, 400, 0.90),
    ]
    summary = accuracy.summarize(configs, measurements)
    assert summary["reference"]["seconds_to_90"] == {
        "n": 2, "median": 510.0, "min": 500.0, "max": 520.0, "spread": 0.0392, "reached": 2}
    assert summary["distributed"]["final_test_accuracy"]["median"] == 0.9
    assert summary["speedup_to_89_over_reference"] == round(300 / 220, 3)
    assert summary["speedup_to_90_over_reference"] == round(510 / 260, 3)
    # Only one baseline run of three reached 90%: no median time, no speed-up.
    assert summary["baseline"]["seconds_to_90"]["reached"] == 1
    assert summary["speedup_to_90_over_baseline"] is None


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


def test_result_line_is_read_from_the_output():
    output = '[0]<stdout>:RESULT {"epochs": 1}\nnoise\n[0]<stdout>:RESULT {"test_accuracy": 0.9}\n'
    assert parse_result(output) == {"test_accuracy": 0.9}  # the last one
    for text, why in [("no result here", "no `RESULT"), ("RESULT {oops}", "not valid JSON")]:
        with pytest.raises(ValueError, match=why):
            parse_result(text)
    # Every RESULT line, in order (both ranks print one before step 3), for the tests.
    assert facts.results(output) == [{"epochs": 1}, {"test_accuracy": 0.9}]
    assert facts.results("no result here") == []
    with pytest.raises(ValueError, match="not valid JSON"):
        facts.results('RESULT {"epochs": 1}\nRESULT {oops}\n')


def test_synthetic_class_is_fixed_and_has_every_kind(tmp_path):
    first, again = grading.synthetic_class(40), grading.synthetic_class(40)
    assert first == again
    scores = set()
    for student, script in first.items():
        if script is None:
            continue
        path = tmp_path / f"{student}.py"
        path.write_text(script)
        scores.add(sum(result.passed for result in check_all(path)))
    assert None in first.values() and "" in first.values()
    assert set(range(13)) <= scores  # every score from 0 to 12 occurs


@pytest.mark.slow
@pytest.mark.timeout(2000)
def test_every_benchmark_runs_tiny_and_writes_json_and_png(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "bench", "all", "--tiny", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("scaling", "accuracy", "overhead", "grading", "verdicts"):
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
        "baseline", "distributed", "reference", "reference"]
    for run in runs:
        assert [p["epoch"] for p in run["curve"]] == [1, 2]
        assert 0 < run["curve"][0]["seconds"] < run["curve"][1]["seconds"] <= run["wall_seconds"]
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
    assert (by_kind[12], by_kind[6], by_kind[0]) == (12, 6, 0)  # stopped after step N: N
    assert by_kind[17] == by_kind[18] == by_kind[19] == 0  # syntax error, empty, missing
    assert 0 < by_kind[13] < 12  # one Horovod line deleted
    verdicts = BenchResult.read(tmp_path / "verdicts.json").summary
    assert verdicts["scripts"] == 3 and verdicts["steps"] == 36
    assert sum(verdicts["reading"].values()) == 36 and sum(verdicts["decided_by"].values()) == 36
    # With runs, each script of the chain scores its step, decided by what it did.
    assert grades.summary["runs_score_the_chains_steps"], grades.summary["runs_wrong"]


def test_readme_shows_the_committed_results():
    text = readme.README.read_text(encoding="utf-8")
    assert readme.replace_section(text, readme.section()) == text, (
        "README.md's benchmark section is stale: run `python -m bench readme`"
    )


def test_readme_section_is_written_from_result_files(tmp_path):
    assert "No benchmark results yet" in readme.section(tmp_path)
    BenchResult(
        benchmark="grading",
        machine={"cores": 2, "cpu": "cpu", "memory_gib": 4, "gpus": [], "tensorflow": "2.15.1",
                 "horovod": "0.28.1", "date": "2026-11-22 06:00 UTC", "commit": "abc1234"},
        settings={}, measurements={},
        summary={"one_file_seconds": {"solution (12 pass)": {"median": 0.21}},
                 "students": 200, "batch_seconds": {"median": 3.5},
                 "batch_ms_per_submission": 17.5,
                 "nbgrader_seconds": {"median": 200.0, "min": 190.0, "max": 230.0, "n": 3},
                 "nbgrader_seconds_per_submission": 1.0, "grades_equal": True},
    ).write(tmp_path)
    body = readme.section(tmp_path)
    assert "| `python -m grader batch`, 200 submissions | 3.5 s (18 ms each) | 20 s |" in body
    assert ("| `python -m instructor autograde` (nbgrader), 200 submissions | "
            "200 s [190-230], n=3 (1.00 s each) | 300 s |") in body
    assert "commit abc1234" in body and "Scaling" not in body


TEST_MARKER = "WORKBOOK_TEST_BENCH_STOP"  # in the environment of every process the test starts


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_benchmark_stopped_by_sigterm_stops_horovodrun_and_its_workers(tmp_path):
    """`kill` (or a scheduler's time limit) on the benchmark's own process: its runner stops
    the run it is in, descendants included, and the benchmark says so and exits with 130."""
    marker = new_marker()
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench", "scaling", "--tiny", "--out", str(tmp_path)],
        cwd=REPO, env={**os.environ, TEST_MARKER: marker}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
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
        assert re.search(r"stopped by SIGTERM in run \S+, its [1-9]\d* process(es)? stopped", err), err
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
