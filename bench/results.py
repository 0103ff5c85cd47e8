"""Statistics of repeated measurements, and the result files (their format:
workbook.bench_results.BenchResult)."""

from __future__ import annotations

import statistics
from pathlib import Path

from bench import machine
from workbook.bench_results import BenchResult


def summarize(values: list) -> dict:
    """Median and spread (min, max, relative spread) of repeated measurements."""
    values = [float(v) for v in values]
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None, "spread": None}
    median = statistics.median(values)
    return {
        "n": len(values),
        "median": round(median, 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        # (max - min) / median: 0.05 means the repetitions lie within 5% of each other.
        "spread": round((max(values) - min(values)) / median, 4) if median else None,
    }


def write(name: str, out_dir: Path, settings: dict, measurements, summary: dict) -> Path:
    """Writes <out_dir>/<name>.json with the machine, and returns its path."""
    return BenchResult(
        benchmark=name,
        machine=machine.describe(),
        settings=settings,
        measurements=measurements,
        summary=summary,
    ).write(out_dir)
