"""A bar chart of solutions/bonus/input_pipeline.py's results: where the input pipeline limits.

    from workbook.pipeline_plot import read_result, save_plot
    save_plot([read_result(one_worker.output), read_result(two_workers.output)], "pipeline.png")

    python -m workbook.pipeline_plot logs/a/horovodrun.log logs/b/horovodrun.log -o pipeline.png

One group of bars per pipeline variant, one bar per run (its worker count), total images/s over
all workers on a log scale. A dashed line per run is the model's consumption rate: how many
images/s the workers train when the input costs nothing (one batch held in memory). A pipeline
bar below its run's line is the bottleneck. Diamonds mark training behind a real pipeline.
Uses matplotlib's object API only (no pyplot), so it never changes a notebook's backend.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbook.facts import parse_result

IN_MEMORY = "in-memory"  # the script's name for training on one batch held in memory
REQUIRED_KEYS = ("workers", "pipelines", "training")
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")


class PipelineResultError(ValueError):
    """Text without a usable RESULT line of input_pipeline.py."""


def read_result(text: str | dict) -> dict:
    """The last `RESULT {json}` of input_pipeline.py's output (or the dict itself), checked."""
    if isinstance(text, dict):
        result = text
    else:
        try:
            result = parse_result(text)
        except ValueError as error:
            raise PipelineResultError(str(error)) from None
    missing = [key for key in REQUIRED_KEYS if key not in result]
    if missing:
        raise PipelineResultError(
            f"not a RESULT of input_pipeline.py: no {', '.join(missing)} in it"
        )
    if not result["pipelines"]:
        raise PipelineResultError("the RESULT measured no pipeline variant")
    return result


def variant_label(entry: dict) -> str:
    """`prefetch + augment` for {"variant": "prefetch", "augment": true}."""
    return entry["variant"] + (" + augment" if entry.get("augment") else "")


def run_label(result: dict) -> str:
    workers = result["workers"]
    cost = result.get("decode_cost")
    decode = f", decode cost {cost}" if cost else ""
    return f"{workers} worker{'s' if workers != 1 else ''}{decode}"


def pipeline_figure(results: list[dict], title: str | None = None):
    """A matplotlib Figure: variants x runs, total images/s, the model's rate as a line."""
    from matplotlib.figure import Figure

    results = [read_result(result) for result in results]
    if not results:
        raise PipelineResultError("no results to plot")
    labels = list(dict.fromkeys(variant_label(p) for r in results for p in r["pipelines"]))
    figure = Figure(figsize=(max(7.0, 1.1 * len(labels) + 2), 4.5))
    axes = figure.add_subplot()
    width = 0.8 / len(results)
    for index, result in enumerate(results):
        color = COLORS[index % len(COLORS)]
        totals = {variant_label(p): p["total"] for p in result["pipelines"]}
        positions = [i + (index - (len(results) - 1) / 2) * width for i in range(len(labels))]
        heights = [totals.get(label, 0) for label in labels]
        bars = axes.bar(positions, heights, width, color=color, label=run_label(result))
        axes.bar_label(bars, labels=[f"{h:,.0f}" if h else "" for h in heights], fontsize=7)
        for entry in result["training"]:
            if entry["variant"] == IN_MEMORY:
                axes.axhline(
                    entry["total"],
                    color=color,
                    linestyle="--",
                    linewidth=1.5,
                    label=f"model alone, {run_label(result)}: {entry['total']:,.0f}/s",
                )
            elif variant_label(entry) in labels:
                x = positions[labels.index(variant_label(entry))]
                axes.plot(x, entry["total"], "D", color="black", markersize=6, zorder=3)
    if any(e["variant"] != IN_MEMORY for r in results for e in r["training"]):
        axes.plot([], [], "D", color="black", label="training behind this pipeline")
    axes.set_yscale("log")
    axes.set_xticks(range(len(labels)), labels, rotation=20, ha="right")
    axes.set_ylabel("images/second, all workers")
    axes.grid(axis="y", which="both", alpha=0.3)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    axes.set_title(title or "Input pipeline variants against the model's consumption rate")
    figure.tight_layout()
    return figure


def save_plot(results: list[dict], path: str | Path, title: str | None = None) -> Path:
    """Writes the chart of `results` as a PNG to `path`; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pipeline_figure(results, title).savefig(path, dpi=110)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workbook.pipeline_plot",
        description="Plot the RESULT lines of solutions/bonus/input_pipeline.py runs as a PNG.",
    )
    parser.add_argument("outputs", nargs="+", type=Path, help="files holding a run's output")
    parser.add_argument("-o", "--out", type=Path, default=Path("pipeline.png"), help="the PNG")
    args = parser.parse_args(argv)
    results = []
    for path in args.outputs:
        try:
            results.append(read_result(path.read_text(errors="replace")))
        except OSError as error:
            print(f"pipeline_plot: cannot read {path}: {error.strerror}", file=sys.stderr)
            return 2
        except PipelineResultError as error:
            print(f"pipeline_plot: {path}: {error}", file=sys.stderr)
            return 2
    print(save_plot(results, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
