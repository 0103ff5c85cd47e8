"""Bench results: the format of `make bench`'s result files (bench/results/<name>.json), one
description for the benchmarks that write them (bench/) and the notebooks that read them.

    BenchResult             one file: the benchmark's name, the machine, the settings, every
                            measurement and the summary; written and read only here
    SCALING_*, ACCURACY_*   the summary's keys that leave bench/ (the README, the plots and
                            the run_distributed notebook read them; bench/scaling.py and
                            accuracy.py write them)
    figures(results_dir)    what the run_distributed notebook sets beside the learner's figures

A summary's statistics are bench.results.summarize()'s: {n, median, min, max, spread}.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from workbook.paths import REPO

RESULTS_DIR = REPO / "bench" / "results"  # the committed results (`make bench`)

# The scaling benchmark's summary: per launch's label, its images/s ({"images_per_second":
# stats}); per number of workers (a string: JSON's keys), the efficiencies' stats.
SCALING_CONFIGS = "configs"
SCALING_IMAGES_PER_SECOND = "images_per_second"
SCALING_EFFICIENCY = "scaling_efficiency"
SCALING_MACHINE_CEILING = "machine_ceiling"
SCALING_HOROVOD_SHARE = "horovod_share_of_ceiling"
# The accuracy benchmark's summary: per configuration, the stats of its time to each target.
ACCURACY_CONFIGS = ("reference", "distributed", "baseline")


def accuracy_time_key(target: float) -> str:
    """The accuracy summary's key of the time to `target` (0.9: seconds_to_90)."""
    return f"seconds_to_{round(target * 100)}"


@dataclass(frozen=True)
class BenchResult:
    """One result file."""

    benchmark: str  # its name: the file is <name>.json
    machine: dict  # bench.machine.describe()
    settings: dict
    measurements: list | dict
    summary: dict

    def write(self, out_dir: Path) -> Path:
        """Writes <out_dir>/<benchmark>.json and returns its path."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{self.benchmark}.json"
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> BenchResult:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def find(cls, results_dir: Path, name: str) -> BenchResult | None:
        """The benchmark `name`'s result in `results_dir` (None: not measured there)."""
        path = Path(results_dir) / f"{name}.json"
        return cls.read(path) if path.is_file() else None


def figures(results_dir: Path = RESULTS_DIR) -> dict:
    """The benchmark figures that the run_distributed notebook sets beside the learner's: {name:
    (median, min, max)} of the scaling and accuracy results in `results_dir`."""
    found = {}
    if scaling := BenchResult.find(results_dir, "scaling"):
        summary = scaling.summary
        for name, stats in summary.get(SCALING_CONFIGS, {}).items():
            found[name] = stats[SCALING_IMAGES_PER_SECOND]
        for n, stats in summary.get(SCALING_EFFICIENCY, {}).items():
            found[f"scaling efficiency, {n} workers"] = stats
        for n, stats in summary.get(SCALING_HOROVOD_SHARE, {}).items():
            found[f"share of the ceiling, {n} workers"] = stats
    if accuracy := BenchResult.find(results_dir, "accuracy"):
        summary = accuracy.summary
        for name in ACCURACY_CONFIGS:
            if name in summary and accuracy_time_key(0.9) in summary[name]:
                found[f"time to 90%, {name}"] = summary[name][accuracy_time_key(0.9)]
    return {
        name: (s.get("median"), s.get("min"), s.get("max"))
        for name, s in found.items()
        if s.get("median") is not None
    }
