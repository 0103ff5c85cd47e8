"""The input-pipeline script for real (solutions/bonus/input_pipeline.py), in one process and
under `horovodrun -np 2` (Gloo), with a few batches, started by the runner (workbook.runner's
plan_run and execute) as the runner cell starts them: its RESULT line has every variant,
positive rates, totals that add up.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from processes import run_script
from workbook.facts import results
from workbook.pipeline_plot import save_plot

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "solutions" / "bonus" / "input_pipeline.py"
SAMPLE = REPO / "data" / "sample"
VENV_BIN = Path(sys.executable).parent
VARIANTS = ("sequential", "parallel", "prefetch", "cache")
# A few batches of each variant, a tiny model: seconds of work per worker.
TINY = [
    "--data-dir",
    str(SAMPLE),
    "--train-images",
    "512",
    "--batches",
    "4",
    "--warmup-batches",
    "1",
    "--train-batches",
    "2",
    "--depth",
    "10",
    "--decode-cost",
    "5",
]

# The RESULT of a real run (horovodrun --gloo -np 2, --train-images 1024 --batches 5
# --warmup-batches 1 --train-batches 2 --depth 10 --decode-cost 40, on a busy 2-core VM).
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

needs_sample = pytest.mark.skipif(
    not (SAMPLE / "train.npz").is_file(),
    reason=f"no sample data in {SAMPLE}: git checkout -- data/sample",
)


QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # TensorFlow's C++ notes stay out of the output


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


@needs_sample
def test_one_process_measures_every_variant(tmp_path):
    run, output = run_script(
        [SCRIPT, *TINY], tmp_path, timeout=900, cwd=REPO, np=1, launcher="python", env=QUIET
    )
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
    assert result["sharding"]["shard_then_shuffle"] == {"distinct": 512, "repeated": 0, "missed": 0}
    check_png(save_plot([result], tmp_path / "one.png"))


@needs_sample
@pytest.mark.skipif(
    not (VENV_BIN / "horovodrun").exists() and shutil.which("horovodrun") is None,
    reason="horovodrun is not installed in this environment",
)
def test_two_workers_report_per_worker_and_total_rates(tmp_path):
    run, output = run_script(
        [SCRIPT, *TINY, "--variants", "sequential,prefetch", "--augment", "on"],
        tmp_path,
        timeout=900,
        cwd=REPO,
        np=2,
        env=QUIET,
    )
    assert run.exit_code == 0, output[-6000:]
    printed = results(output)
    assert len(printed) == 1, "only rank 0 prints the RESULT"
    assert re.search(r"^\[0\]<stdout>:RESULT ", output, re.M)
    result = printed[0]
    assert result["workers"] == 2 and result["images_per_worker"] == 256
    assert [(p["variant"], p["augment"]) for p in result["pipelines"]] == [
        ("sequential", True),
        ("prefetch", True),
    ]
    check_rates(result, workers=2)
    # Sharding first gives the workers disjoint halves; shuffling first (each worker with its
    # own random order) makes them overlap, and some images are never seen in that epoch.
    sharding = result["sharding"]
    assert sharding["shard_then_shuffle"] == {"distinct": 512, "repeated": 0, "missed": 0}
    assert sharding["shuffle_then_shard"]["repeated"] > 0
    assert sharding["shuffle_then_shard"]["missed"] == sharding["shuffle_then_shard"]["repeated"]
    check_png(save_plot([result], tmp_path / "two.png"))
