"""The benchmarks' arithmetic and results (bench/). The measured numbers themselves are not
asserted: speed targets are reported by the benchmarks, not tested here. Their launcher and
contention monitor on real processes: tests/smoke/test_bench_processes.py; every benchmark run
on tiny settings: tests/system/test_bench_runs.py (`make bench-check`)."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from bench import accuracy, grading, plots, readme, results, scaling
from bench.processes import FirstStepConsole
from bench.training import Launch
from grader import check_all
from workbook import facts
from workbook.bench_results import BenchResult
from workbook.facts import LAST_STEP, parse_result, usable_cores
from workbook.runner.command import HOROVODRUN, PIN_LAUNCHER


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
    assert two.argv == [
        *HOROVODRUN,
        "--gloo",
        "-np",
        "2",
        sys.executable,
        str(script),
        "--epochs",
        "1",
        "--log-dir",
        str(logs / "run"),
    ]
    assert two.env["TF_NUM_INTRAOP_THREADS"] == "1" and two.env["CUDA_VISIBLE_DEVICES"] == ""
    assert two.env["TF_CPP_MIN_LOG_LEVEL"] == "2" and not two.layout.pinned
    pinned = plan(Launch(2, 1, pinned=True), ["--epochs", "1"])
    assert pinned.layout.pinned
    assert pinned.argv[len(HOROVODRUN) + 2 :][:5] == [
        "2",
        sys.executable,
        str(PIN_LAUNCHER),
        "1",
        str(script),
    ]
    # The benchmark's 2 pinned workers are what a notebook cell's np=2, share=1 starts.
    cell = plan_run(
        [str(script), "--epochs", "1"],
        np=2,
        share=1,
        gpus=0,
        run_name="run",
        logs_root=logs,
        log_dir=logs / "run",
    )
    assert (cell.argv, cell.layout) == (pinned.argv, pinned.layout)

    python = plan(Launch(1, None, horovodrun=False))
    assert python.argv[:2] == [sys.executable, str(script)] and python.launcher == "python"
    assert "TF_NUM_INTRAOP_THREADS" not in python.env or "TF_NUM_INTRAOP_THREADS" in os.environ
    # horovodrun without threads: TensorFlow's own thread defaults, as a plain horovodrun.
    default = plan(Launch(1, None))
    assert default.layout.threads is None
    assert default.argv[len(HOROVODRUN) :][:3] == ["--gloo", "-np", "1"]
    assert Launch(1, None).options(logs / "run") == RunOptions(
        np=1,
        tf_threads=False,
        run_name="run",
        logs_root=logs,
        log_dir=logs / "run",
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""},
        gpus=0,
    )
    # Each of `separate`'s processes: plain python, pinned to its block of cores.
    separate = plan(Launch(2, 1, horovodrun=False, pinned=True, separate=True))
    assert separate.argv[:4] == [sys.executable, str(PIN_LAUNCHER), "1", str(script)]


def test_scaling_efficiency_pairs_runs_of_the_same_repetition():
    configs = scaling.launches(cores=2, gpus=0)
    rates = {
        (0, 0): 500,
        (0, 1): 300,
        (0, 2): 540,
        (0, 3): 570,
        (1, 0): 520,
        (1, 1): 250,
        (1, 2): 480,
        (1, 3): 490,
    }
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
    points = [
        {"seconds": 100, "accuracy": 0.85},
        {"seconds": 200, "accuracy": 0.9},
        {"seconds": 300, "accuracy": 0.89},
    ]
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
        (0, "reference"),
        (0, "distributed"),
        (0, "baseline"),
        (1, "baseline"),
        (1, "distributed"),
        (2, "baseline"),
        (2, "reference"),
        (2, "distributed"),
    ]
    alone = accuracy.schedule(2, side_by_side=False)
    assert [name for _, name in alone] == [
        "reference",
        "distributed",
        "baseline",
        "distributed",
        "baseline",
        "reference",
    ]


def _accuracy_run(config, to_89, to_90, final):
    return {
        "config": config,
        "seconds_to_89": to_89,
        "seconds_to_90": to_90,
        "final_test_accuracy": final,
        "wall_seconds": 600.0,
        "neighbours": [],
    }


def test_accuracy_summary_takes_medians_and_ignores_a_target_most_runs_missed():
    configs = accuracy.launches(cores=2, gpus=0)
    measurements = [
        _accuracy_run("reference", 300, 500, 0.90),
        _accuracy_run("reference", 320, None, 0.89),
        _accuracy_run("reference", 280, 520, 0.905),
        _accuracy_run("distributed", 200, 250, 0.90),
        _accuracy_run("distributed", 220, 260, 0.91),
        _accuracy_run("distributed", 240, 300, 0.90),
        _accuracy_run("baseline", 250, None, 0.88),
        _accuracy_run("baseline", 260, None, 0.89),
        _accuracy_run("baseline", 270, 400, 0.90),
    ]
    summary = accuracy.summarize(configs, measurements)
    assert summary["reference"]["seconds_to_90"] == {
        "n": 2,
        "median": 510.0,
        "min": 500.0,
        "max": 520.0,
        "spread": 0.0392,
        "reached": 2,
    }
    assert summary["distributed"]["final_test_accuracy"]["median"] == 0.9
    assert summary["speedup_to_89_over_reference"] == round(300 / 220, 3)
    assert summary["speedup_to_90_over_reference"] == round(510 / 260, 3)
    # Only one baseline run of three reached 90%: no median time, no speed-up.
    assert summary["baseline"]["seconds_to_90"]["reached"] == 1
    assert summary["speedup_to_90_over_baseline"] is None


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
    kinds = grading.synthetic_kinds(40)
    assert set(kinds.values()) == set(range(grading.KINDS))
    scores = set()
    for student, script in first.items():
        kind = kinds[student]
        if kind == grading.NO_SCRIPT:
            assert script is None
            continue
        path = tmp_path / f"{student}.py"
        path.write_text(script)
        score = sum(result.passed for result in check_all(path))
        scores.add(score)
        if grading.stopped_after(kind) is not None:
            assert score == grading.stopped_after(kind), student  # the chain's truth
        elif kind in grading.LINE_DELETED:
            assert score < LAST_STEP, student
        else:
            assert kind in (grading.SYNTAX_ERROR, grading.EMPTY) and score == 0, student
    assert "" in first.values()
    assert set(range(LAST_STEP + 1)) <= scores  # every score from 0 to the last step occurs


def test_readme_shows_the_committed_results():
    text = readme.README.read_text(encoding="utf-8")
    assert readme.replace_section(text, readme.section()) == text, (
        "README.md's benchmark section is stale: run `python -m bench readme`"
    )


def test_readme_section_is_written_from_result_files(tmp_path):
    assert "No benchmark results yet" in readme.section(tmp_path)
    # A grading result as bench/grading.py writes it, on the tiny setting (no baseline).
    autograde = {
        "seconds": 200.0,
        "load_average": 3.0,
        "jobs": 2,
        "kernel_wait": 20.0,
        "checks": 10.0,
        "notebooks": 200,
        "phases": {"nbgrader runs": 150.0, "judging": 30.0, "intake": 2.0},
    }
    pairs = {
        "current": [autograde, {**autograde, "seconds": 190.0}, {**autograde, "seconds": 230.0}],
        "quick": [{"seconds": 40.0}],
        "baseline": [],
        "baseline_students": 0,
        "baseline_ref": grading.BASELINE_REF,
    }
    summary = {
        "one_file_seconds": {grading.ONE_FILE_SOLUTION: results.summarize([0.21])},
        **grading.class_summary(200, [3.5], pairs),
        "grades_equal": True,
        "mismatches": {},
        "runs_score_the_chains_steps": True,
        "runs_wrong": {},
    }
    BenchResult(
        benchmark="grading",
        machine={
            "cores": 2,
            "cpu": "cpu",
            "memory_gib": 4,
            "gpus": [],
            "tensorflow": "2.15.1",
            "horovod": "0.28.1",
            "date": "2026-11-22 06:00 UTC",
            "commit": "abc1234",
        },
        settings={},
        summary=summary,
        measurements={"scores": {"student000": {"batch": 3.0, "quick": 3.0, "nbgrader": 3.0}}},
    ).write(tmp_path)
    body = readme.section(tmp_path)
    assert (
        f"| `python -m grader check`, one file, solution ({LAST_STEP} pass) | 0.21 s | 0.3 s |"
    ) in body
    assert "| `python -m grader batch`, 200 submissions | 3.5 s (18 ms each) | 20 s |" in body
    assert (
        "| `python -m instructor autograde --no-run` (reading only, advisory), 200 "
        "submissions | 40 s [40-40], n=1 (0.20 s each) | 300 s |"
    ) in body
    assert (
        "| `python -m instructor autograde` (every script run in the sandbox, then "
        "nbgrader), 200 submissions | 200 s [190-230], n=3 (1.00 s each) | 1200 s |"
    ) in body
    assert "| running and reading the scripts (judging) | 0.150 [0.150-0.150], n=3 |" in body
    assert "Per student, paired" not in body  # no baseline measured
    assert "equal for every student: **True**." in body
    assert "commit abc1234" in body and "Scaling" not in body


@pytest.mark.parametrize("name", sorted(path.stem for path in readme.RESULTS_DIR.glob("*.json")))
def test_every_committed_result_draws_its_picture(tmp_path, name):
    """The pictures from the committed measurements, each kind of result (the tiny runs that
    measure them anew are `make bench-check`'s)."""
    shutil.copy(readme.RESULTS_DIR / f"{name}.json", tmp_path)
    png = plots.plot(tmp_path / f"{name}.json")
    assert png == tmp_path / f"{name}.png"
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and png.stat().st_size > 10_000
