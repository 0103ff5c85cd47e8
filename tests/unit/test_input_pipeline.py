"""The input-pipeline lesson: solutions/bonus/input_pipeline.py and workbook/pipeline_plot.py.

Fast tests: the script's model and augmentation are the solution's, bad options end with one
line and exit code 2, and the plot is drawn from a RESULT captured from a real 2-worker run.
Slow tests run the script for real, in one process and under `horovodrun -np 2` (Gloo), with a
few batches, started by the runner (workbook.runner's plan_run and execute) as the runner cell
starts them, and check its RESULT line: every variant, positive rates, totals that add up.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from processes import run_script
from workbook import pipeline_plot
from workbook.facts import parse_result, results, with_safe_env
from workbook.pipeline_plot import PipelineResultError, read_result, save_plot

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "solutions" / "bonus" / "input_pipeline.py"
SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"
SAMPLE = REPO / "data" / "sample"
VENV_BIN = Path(sys.executable).parent
VARIANTS = ("sequential", "parallel", "prefetch", "cache")
# A few batches of each variant, a tiny model: seconds of work per worker.
TINY = [
    "--data-dir", str(SAMPLE), "--train-images", "512", "--batches", "4",
    "--warmup-batches", "1", "--train-batches", "2", "--depth", "10", "--decode-cost", "5",
]

# The RESULT of a real run (horovodrun --gloo -np 2, --train-images 1024 --batches 5
# --warmup-batches 1 --train-batches 2 --depth 10 --decode-cost 40, on a busy 2-core VM).
CAPTURED = (
    '[0]<stdout>:RESULT {"workers": 2, "cores": 2, "intra_op_threads": 0, "images": 1024, '
    '"images_per_worker": 512, "batch_size": 32, "batches": 5, "train_batches": 2, '
    '"decode_cost": 40, "model": "WRN-10-1", "pipelines": [{"variant": "sequential", '
    '"augment": false, "warmup_batches": 1, "per_worker": [1004.5, 474.4], "total": 1478.9}, '
    '{"variant": "sequential", "augment": true, "warmup_batches": 1, "per_worker": [833.3, '
    '656.1], "total": 1489.4}, {"variant": "parallel", "augment": false, "warmup_batches": 1, '
    '"per_worker": [523.6, 609.5], "total": 1133.1}, {"variant": "parallel", "augment": true, '
    '"warmup_batches": 1, "per_worker": [879.6, 854.1], "total": 1733.7}, {"variant": '
    '"prefetch", "augment": false, "warmup_batches": 1, "per_worker": [897.0, 1022.0], '
    '"total": 1919.0}, {"variant": "prefetch", "augment": true, "warmup_batches": 1, '
    '"per_worker": [162.0, 166.9], "total": 328.8}, {"variant": "cache", "augment": false, '
    '"warmup_batches": 16, "per_worker": [84759.3, 138613.9], "total": 223373.3}, {"variant": '
    '"cache", "augment": true, "warmup_batches": 16, "per_worker": [805.7, 12828.1], "total": '
    '13633.7}], "training": [{"variant": "in-memory", "augment": null, "warmup_batches": 2, '
    '"per_worker": [309.9, 309.7], "total": 619.7}, {"variant": "prefetch", "augment": true, '
    '"warmup_batches": 2, "per_worker": [203.8, 359.2], "total": 563.0}, {"variant": "cache", '
    '"augment": true, "warmup_batches": 2, "per_worker": [93.4, 93.4], "total": 186.8}], '
    '"sharding": {"shard_then_shuffle": {"distinct": 1024, "repeated": 0, "missed": 0}, '
    '"shuffle_then_shard": {"distinct": 772, "repeated": 252, "missed": 252}}}'
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

needs_sample = pytest.mark.skipif(
    not (SAMPLE / "train.npz").is_file(),
    reason=f"no sample data in {SAMPLE}: git checkout -- data/sample",
)


QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # TensorFlow's C++ notes stay out of the output


def environment() -> dict:
    # horovodrun and the workers come from this environment; TensorFlow's C++ notes stay out;
    # as in a kernel or terminal of `make lab`, MPI does not hang on TensorBoard's port.
    return dict(
        with_safe_env(),
        PATH=os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
    )


def in_a_terminal(args: list, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python input_pipeline.py args` as a learner types it in a terminal. Left bare on purpose:
    the bad-options tests check what the terminal shows, stderr apart from stdout."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True, text=True, timeout=timeout, env=environment(), cwd=REPO,
    )


def function_source(path: Path, name: str) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
             and node.name == name]
    assert len(found) == 1, f"{path.name}: {len(found)} functions named {name}"
    return ast.unparse(found[0])


def check_rates(result: dict, workers: int) -> None:
    """Every rate positive, one per worker, and each total the sum of its workers' rates."""
    for entry in result["pipelines"] + result["training"]:
        assert len(entry["per_worker"]) == workers, entry
        assert all(rate > 0 for rate in entry["per_worker"]), entry
        # The total comes from an allreduce, the per-worker list from an allgather.
        assert entry["total"] == pytest.approx(sum(entry["per_worker"]), rel=1e-3, abs=0.2)


def check_png(path: Path) -> None:
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == PNG_SIGNATURE
    height, width, _ = imread(path).shape
    assert width > 500 and height > 300


# --- fast: what the script shares with the solution, and its bad options ----------------------


@pytest.mark.parametrize("name", ["wide_resnet", "augment"])
def test_model_and_augmentation_are_the_solutions(name):
    assert function_source(SCRIPT, name) == function_source(SOLUTION, name)


@needs_sample
@pytest.mark.parametrize(
    "args, message",
    [
        (["--variants", "sequential,turbo"], r"unknown variant 'turbo'; choose from sequential"),
        (["--batches", "0"], r"--batches: must be at least 1, not 0"),
        (["--batches", "many"], r"--batches: 'many' is not a whole number"),
        (["--augment", "maybe"], r"--augment: invalid choice: 'maybe'"),
        (["--data-dir", "/nonexistent"], r"no /nonexistent/train\.npz: run `python -m workbook"),
        (["--train-images", "20"], r"20 images make fewer than one batch of 32 per worker"),
    ],
)
def test_bad_options_say_what_is_wrong_in_one_line(args, message):
    run = in_a_terminal(["--data-dir", str(SAMPLE), *args], timeout=300)
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and re.search(message, errors[0]), run.stderr
    assert "Traceback" not in run.stderr
    assert "RESULT" not in run.stdout


# --- fast: the plot, from a real run's RESULT --------------------------------------------------


def test_plot_of_a_captured_result_is_a_png(tmp_path):
    result = read_result(CAPTURED)
    assert result["workers"] == 2 and len(result["pipelines"]) == 8
    path = save_plot([result], tmp_path / "plots" / "pipeline.png")
    check_png(path)


def test_plot_draws_one_bar_per_variant_and_run_and_the_models_line():
    one_worker = parse_result(CAPTURED)
    one_worker["workers"] = 1
    figure = pipeline_plot.pipeline_figure([one_worker, read_result(CAPTURED)])
    axes = figure.axes[0]
    assert len(axes.patches) == 2 * 8  # bars: 8 variants x 2 runs
    dashed = [line for line in axes.get_lines() if line.get_linestyle() == "--"]
    assert [line.get_ydata()[0] for line in dashed] == [619.7, 619.7]
    labels = [tick.get_text() for tick in axes.get_xticklabels()]
    assert labels[:2] == ["sequential", "sequential + augment"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("Epoch 1/1\nsome output", "no `RESULT {...}` line"),
        ("RESULT {not json}", "not valid JSON"),
        ('RESULT {"test_accuracy": 0.9}', "no workers, pipelines, training"),
    ],
)
def test_read_result_rejects_other_output(text, message):
    with pytest.raises(PipelineResultError, match=re.escape(message)):
        read_result(text)


def test_plot_command_writes_a_png_or_exits_2(tmp_path, capsys):
    log = tmp_path / "horovodrun.log"
    log.write_text("[0]<stdout>:pipeline sequential 1,478 images/s\n" + CAPTURED + "\n")
    assert pipeline_plot.main([str(log), "-o", str(tmp_path / "out.png")]) == 0
    check_png(tmp_path / "out.png")
    training_log = tmp_path / "training.log"
    training_log.write_text('RESULT {"test_accuracy": 0.9}\n')
    assert pipeline_plot.main([str(training_log), "-o", str(tmp_path / "no.png")]) == 2
    assert "training.log: not a RESULT of input_pipeline.py" in capsys.readouterr().err
    assert pipeline_plot.main([str(tmp_path / "missing.log")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert not (tmp_path / "no.png").exists()


# --- slow: real runs ---------------------------------------------------------------------------


@pytest.mark.slow
@needs_sample
def test_one_process_measures_every_variant(tmp_path):
    run, output = run_script([SCRIPT, *TINY], tmp_path, timeout=900, cwd=REPO, np=1,
                             launcher="python", env=QUIET)  # fmt: skip
    assert run.exit_code == 0, output[-3000:]
    [result] = results(output)
    assert result["workers"] == 1 and result["images_per_worker"] == 512
    measured = {(p["variant"], p["augment"]) for p in result["pipelines"]}
    assert measured == {(v, a) for v in VARIANTS for a in (False, True)}
    check_rates(result, workers=1)
    # The cache variant warms up for a whole pass over the shard: 512 / 32 = 16 batches.
    assert {p["variant"]: p["warmup_batches"] for p in result["pipelines"]}["cache"] == 16
    fed = [entry["variant"] for entry in result["training"]]
    assert fed[0] == "in-memory" and 2 <= len(fed) <= 3
    assert all(entry["augment"] for entry in result["training"][1:])
    assert result["sharding"]["shard_then_shuffle"] == {"distinct": 512, "repeated": 0,
                                                        "missed": 0}
    check_png(save_plot([result], tmp_path / "one.png"))


@pytest.mark.slow
@needs_sample
@pytest.mark.skipif(
    not (VENV_BIN / "horovodrun").exists() and shutil.which("horovodrun") is None,
    reason="horovodrun is not installed in this environment",
)
def test_two_workers_report_per_worker_and_total_rates(tmp_path):
    run, output = run_script(
        [SCRIPT, *TINY, "--variants", "sequential,prefetch", "--augment", "on"], tmp_path,
        timeout=900, cwd=REPO, np=2, env=QUIET,
    )
    assert run.exit_code == 0, output[-6000:]
    printed = results(output)
    assert len(printed) == 1, "only rank 0 prints the RESULT"
    assert re.search(r"^\[0\]<stdout>:RESULT ", output, re.M)
    result = printed[0]
    assert result["workers"] == 2 and result["images_per_worker"] == 256
    assert [(p["variant"], p["augment"]) for p in result["pipelines"]] == [
        ("sequential", True), ("prefetch", True)]
    check_rates(result, workers=2)
    # Sharding first gives the workers disjoint halves; shuffling first (each worker with its
    # own random order) makes them overlap, and some images are never seen in that epoch.
    sharding = result["sharding"]
    assert sharding["shard_then_shuffle"] == {"distinct": 512, "repeated": 0, "missed": 0}
    assert sharding["shuffle_then_shard"]["repeated"] > 0
    assert sharding["shuffle_then_shard"]["missed"] == sharding["shuffle_then_shard"]["repeated"]
    check_png(save_plot([result], tmp_path / "two.png"))
