"""The input-pipeline lesson: solutions/bonus/input_pipeline.py and workbook/pipeline_plot.py.

The script's model and augmentation are the solution's, and the plot is drawn from a RESULT
captured from a real 2-worker run. Bad options: tests/smoke/test_input_pipeline_processes.py;
the script for real: tests/system/test_input_pipeline_runs.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from workbook import pipeline_plot
from workbook.facts import parse_result
from workbook.pipeline_plot import PipelineResultError, read_result, save_plot

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "solutions" / "bonus" / "input_pipeline.py"
SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"
# A few batches of each variant, a tiny model: seconds of work per worker.

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


def function_source(path: Path, name: str) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name
    ]
    assert len(found) == 1, f"{path.name}: {len(found)} functions named {name}"
    return ast.unparse(found[0])


def check_png(path: Path) -> None:
    from matplotlib.image import imread

    assert path.read_bytes()[:8] == PNG_SIGNATURE
    height, width, _ = imread(path).shape
    assert width > 500 and height > 300


# --- fast: what the script shares with the solution, and its bad options ----------------------


@pytest.mark.parametrize("name", ["wide_resnet", "augment"])
def test_model_and_augmentation_are_the_solutions(name):
    assert function_source(SCRIPT, name) == function_source(SOLUTION, name)


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
