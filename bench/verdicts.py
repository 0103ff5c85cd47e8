"""How often the verdicts are right: the reading alone, and the reading with a run, against the
learner-style corpus whose truth came from runs (tests/grader_cases/learners/truth.json), its
scripts built from the chain (authoring.learners) into a temporary folder.

Per script and step: the reading (grader.check_all) is right, can't tell, or confidently wrong
(a pass of a step that is not done, a failure of one that is); the decided verdict
(grader.judge_file: one run pair in the sandbox when root, and the reading) is right or wrong
("neither" counts as done, as in grading). The goal: the reading never confidently wrong, the
decided verdicts right on every step of every script.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from authoring import learners
from bench import results
from grader.api import CANT_TELL, DECIDERS, PASSED

TINY_FILES = 1  # the tiny setting only checks that everything runs


def corpus(scripts_dir: Path, tiny: bool = False) -> dict:
    """{script path: {step: truth}} of the corpus (the first TINY_FILES when tiny), its scripts
    built into scripts_dir."""
    truth = learners.truth()
    names = sorted(truth)[:TINY_FILES] if tiny else sorted(truth)
    paths = learners.build(scripts_dir, names)
    return {
        paths[name]: {int(step): done for step, done in truth[name]["steps"].items()}
        for name in names
    }


def reading_verdict(status: str, done: bool) -> str:
    if status == CANT_TELL:
        return "can't tell"
    return "right" if (status == PASSED) == done else "wrong"


def verdict_rows(scripts: dict, echo=print) -> list[dict]:
    """Per script of corpus(): the reading's and the decided verdict of each step against its
    truth."""
    from grader.api import Sandbox, check_all, judge_file

    rows = []
    for path, truth in scripts.items():
        started = time.monotonic()
        read = {r.step: r for r in check_all(path)}
        if os.geteuid() == 0:
            with Sandbox() as box:
                decided = {r.step: r for r in judge_file(path, sandbox=box)}
        else:  # the corpus is ours, not a student's: without root it runs unsandboxed
            decided = {r.step: r for r in judge_file(path)}
        row = {"script": path.name, "seconds": round(time.monotonic() - started, 1), "steps": {}}
        for step, done in sorted(truth.items()):
            row["steps"][step] = {
                "truth": done,
                "reading": read[step].status,
                "reading_verdict": reading_verdict(read[step].status, done),
                "decided": decided[step].status,
                "decided_by": decided[step].decided_by,
                "decided_right": decided[step].passed == done,
                "message": decided[step].message[:300],
            }
        rows.append(row)
        wrong = [s for s, v in row["steps"].items() if not v["decided_right"]]
        echo(
            f"  verdicts: {path.name}: {row['seconds']:.0f} s"
            + (f", decided wrong at steps {wrong}" if wrong else "")
        )
    return rows


def run(out_dir: Path, tiny: bool = False, echo=print) -> Path:
    with tempfile.TemporaryDirectory(prefix="learner-scripts-") as scripts_dir:
        rows = verdict_rows(corpus(Path(scripts_dir), tiny), echo)
    steps = [v for row in rows for v in row["steps"].values()]
    summary = {
        "scripts": len(rows),
        "steps": len(steps),
        "reading": {
            kind: sum(v["reading_verdict"] == kind for v in steps)
            for kind in ("right", "can't tell", "wrong")
        },
        "decided_right": sum(v["decided_right"] for v in steps),
        "decided_by": {who: sum(v["decided_by"] == who for v in steps) for who in DECIDERS},
        "reading_wrong": [
            (row["script"], step)
            for row in rows
            for step, v in row["steps"].items()
            if v["reading_verdict"] == "wrong"
        ],
        "decided_wrong": [
            (row["script"], step)
            for row in rows
            for step, v in row["steps"].items()
            if not v["decided_right"]
        ],
        "seconds_per_script": results.summarize([row["seconds"] for row in rows]),
    }
    echo(
        f"  verdicts: reading {summary['reading']}, decided right on {summary['decided_right']} "
        f"of {summary['steps']}"
    )
    return results.write("verdicts", out_dir, {"tiny": tiny, "scripts": len(rows)}, rows, summary)
