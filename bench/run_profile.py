"""Where a student's run check spends its time: the floor under grading with runs.

The run-for-real check (grader/running/) launches the script twice on 2 workers. The probe notes
when each rank got where (grader/running/probe.py's stages); per launch this splits rank 0's time
into TensorFlow's import, the script until model.fit (its imports, data, model, hvd.init),
the first training step (tracing the step's graph, the first allreduce and broadcast), the
rest of model.fit, and the script after it. What no rank saw (horovodrun's launch, Python's
start, the processes' exit and the check's own work) is the rest of the wall clock. Run on
the reference solution in the sandbox, `repeats` times.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench import results
from workbook.facts import LAST_STEP, chain_file_name
from workbook.paths import SOLUTIONS_DIR

# (part, the stage it ends at), in order; each part starts where the one before ended.
PARTS = (
    ("TensorFlow's import", "started the script"),
    ("script until model.fit", "started model.fit"),
    ("first training step", "finished training step 1"),
    ("rest of model.fit", "model.fit returned"),
    ("after model.fit", "ended"),
)
OUTSIDE = "launch, start, exit, checks"


def launch_parts(record: dict) -> dict:
    """{part: seconds} of one rank's record of one launch (parts it never reached: absent)."""
    at = {what: when for when, what in record.get("stages") or []}
    parts, before = {}, at.get("started", 0.0)
    for part, stage in PARTS:
        if stage not in at:
            break
        parts[part] = round(at[stage] - before, 2)
        before = at[stage]
    return parts


def profile_once(script: Path, sandbox=None) -> dict:
    """One check of `script` with its records kept: wall seconds, and each launch's parts."""
    from grader.api import run_step

    work = Path(tempfile.mkdtemp(prefix="run-profile-"))
    try:
        started = time.monotonic()
        result = run_step(LAST_STEP, script, quiet=True, work_dir=work, sandbox=sandbox, keep=True)
        wall = time.monotonic() - started
        records = Path(result.run.log_path).parent / "records"  # kept/ (grader/running/kept.py)
        launches = {}
        for path in sorted(records.glob("run*-rank0.json")):
            record = json.loads(path.read_text(encoding="utf-8"))
            launches[f"launch {record['run']}"] = launch_parts(record)
        seen = sum(sum(parts.values()) for parts in launches.values())
        return {
            "passed": result.passed,
            "wall": round(wall, 2),
            "launches": launches,
            OUTSIDE: round(wall - seen, 2),
            "load_average": round(os.getloadavg()[0], 2),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(out_dir: Path, tiny: bool = False, repeats: int = 5, echo=print) -> Path:
    from grader.api import Sandbox

    script = SOLUTIONS_DIR / chain_file_name(LAST_STEP)
    repeats = 1 if tiny else repeats
    rows = []
    for repeat in range(repeats):
        if os.geteuid() == 0:
            with Sandbox() as box:
                rows.append(profile_once(script, box))
        else:
            rows.append(profile_once(script))
        echo(
            f"  run profile {repeat + 1}/{repeats}: {rows[-1]['wall']:.1f} s "
            f"(load {rows[-1]['load_average']})"
        )
    parts = {}
    for row in rows:
        for launch, seconds in row["launches"].items():
            for part, value in seconds.items():
                parts.setdefault(f"{launch}: {part}", []).append(value)
        parts.setdefault(OUTSIDE, []).append(row[OUTSIDE])
    summary = {
        "wall_seconds": results.summarize([row["wall"] for row in rows]),
        "parts_seconds": {part: results.summarize(values) for part, values in parts.items()},
        "all_passed": all(row["passed"] for row in rows),
        "load_average": results.summarize([row["load_average"] for row in rows]),
    }
    for part, value in summary["parts_seconds"].items():
        echo(f"  run profile: {part}: median {value['median']:.2f} s")
    return results.write(
        "run_profile",
        out_dir,
        {"tiny": tiny, "repeats": repeats, "script": script.name},
        rows,
        summary,
    )
