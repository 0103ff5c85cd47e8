"""Statistics of repeated measurements, and the result files."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench import machine
from workbook.paths import REPO

RESULTS_DIR = REPO / "bench" / "results"


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
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": name,
        "machine": machine.describe(),
        "settings": settings,
        "measurements": measurements,
        "summary": summary,
    }
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


def read(path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))
