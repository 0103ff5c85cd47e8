"""Grading throughput: the checker on one file, and a synthetic class graded two ways.

The class is made from the reference chain, the same every time (a fixed seed): scripts that
stop after each step, solutions with one Horovod line deleted, a syntax error, an empty
file, a missing script. It is graded by the checker's batch command (one process) and by
nbgrader autograde through `python -m instructor autograde` (the real nbgrader and gradebook),
and the two sets of grades must be equal, student by student.
"""

from __future__ import annotations

import csv
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import results
from workbook.facts import LAST_STEP, LEARNER_SCRIPT_NAME
from workbook.facts import chain_file_name as output_name
from workbook.paths import SOLUTIONS_DIR

MISSING = None  # a student who handed in no fashion_mnist.py


def reference(step: int) -> str:
    return (SOLUTIONS_DIR / output_name(step)).read_text(encoding="utf-8")


KINDS = 20  # 0-12: stopped after that step; 13-16: one line deleted; 17-19: broken or missing
# A small class with one of each sort: the tiny setting.
TINY_KINDS = (12, 6, 0, 13, 17, 18, 19)


def synthetic_script(kind: int, rng: random.Random) -> str | None:
    """A fashion_mnist.py of one kind (see KINDS)."""
    if kind <= LAST_STEP:
        return reference(kind)  # stopped after step `kind` (0: never started)
    if kind <= 16:  # the solution with one Horovod line deleted
        lines = reference(LAST_STEP).splitlines(keepends=True)
        horovod = [i for i, line in enumerate(lines)
                   if "hvd." in line and not line.lstrip().startswith("#")]
        del lines[rng.choice(horovod)]
        return "".join(lines)
    if kind == 17:
        return reference(LAST_STEP).replace("def ", "def def ", 1)  # a syntax error
    if kind == 18:
        return ""
    return MISSING


def synthetic_class(students: int, seed: int = 0, kinds=None) -> dict:
    """{student: script, or None for no script}, the same for the same arguments.

    Student i gets kind kinds[i], or i % KINDS in a fixed rotation."""
    rng = random.Random(seed)
    return {
        f"student{i:03d}": synthetic_script(kinds[i] if kinds else i % KINDS, rng)
        for i in range(students)
    }


def grader_command(*args) -> list:
    return [sys.executable, "-m", "grader", *map(str, args)]


def instructor_command(*args) -> list:
    return [sys.executable, "-m", "instructor", *map(str, args)]


# Seconds a grading command may take: nbgrader's autograde of 200 students took 1,393 s here.
COMMAND_TIMEOUT_S = 3600


def timed(argv: list, ok_codes=(0,), cwd=None) -> tuple:
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, check=False,
                              timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{' '.join(map(str, argv))} did not finish in {COMMAND_TIMEOUT_S} s")
    seconds = time.perf_counter() - started
    if done.returncode not in ok_codes:
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds, done


def nbgrader_class(work: Path, scripts: dict) -> Path:
    """An nbgrader course whose submitted/ holds the class: released notebooks plus scripts."""
    root = work / "course"
    shutil.rmtree(root, ignore_errors=True)
    roster = work / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(
        f"{s},{s},Synthetic,{s}@example.org\n" for s in scripts))
    for command in (["init", root], ["generate", root], ["add-students", root, roster]):
        timed(instructor_command(*command))
    from instructor.course import Course

    course = Course.open(root)
    release = course.folder("release")
    for student, script in scripts.items():
        folder = course.folder("submitted", student)
        shutil.copytree(release, folder, ignore=shutil.ignore_patterns(LEARNER_SCRIPT_NAME))
        if script is not None:
            (folder / LEARNER_SCRIPT_NAME).write_text(script, encoding="utf-8")
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    return root


def exported_scores(root: Path, work: Path) -> dict:
    csv_path = work / "grades.csv"
    timed(instructor_command("export", root, csv_path))
    with open(csv_path, newline="", encoding="utf-8") as grades:
        return {row["student_id"]: float(row["score"] or 0) for row in csv.DictReader(grades)}


def run(out_dir: Path, tiny: bool = False, students: int = 200, repeats: int = 10,
        echo=print) -> Path:
    students = len(TINY_KINDS) if tiny else students
    repeats = 2 if tiny else repeats
    work = out_dir / "runs" / "grading"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    # One file, all 12 steps, interpreter start included.
    solution, starter = SOLUTIONS_DIR / output_name(LAST_STEP), SOLUTIONS_DIR / output_name(0)
    one_file = {
        "solution (12 pass)": [timed(grader_command("check", solution))[0]
                               for _ in range(repeats)],
        "starter (12 fail, with diffs)": [timed(grader_command("check", starter), (1,))[0]
                                          for _ in range(repeats)],
    }
    for name, seconds in one_file.items():
        echo(f"  grading: one file, {name}: median {results.summarize(seconds)['median']:.3f} s")

    # The class, through nbgrader's layout so that both paths read the same files.
    scripts = synthetic_class(students, kinds=TINY_KINDS if tiny else None)
    root = nbgrader_class(work, scripts)
    submitted = root / "submitted"
    batch_seconds = []
    for _ in range(max(1, repeats // 3)):
        seconds, done = timed(grader_command("batch", submitted, "--json"))
        batch_seconds.append(seconds)
    batch_scores = {g["student"]: float(g["score"]) for g in json.loads(done.stdout)}
    echo(f"  grading: batch, {students} submissions: "
         f"median {results.summarize(batch_seconds)['median']:.2f} s")

    autograde_seconds, done = timed(instructor_command("autograde", root), (0, 1))
    nbgrader_scores = exported_scores(root, work)
    echo(f"  grading: nbgrader autograde, {students} submissions: {autograde_seconds:.1f} s")
    mismatches = {s: {"batch": batch_scores.get(s), "nbgrader": nbgrader_scores.get(s)}
                  for s in scripts if batch_scores.get(s) != nbgrader_scores.get(s)}
    echo(f"  grading: grades equal for {students - len(mismatches)} of {students} students")

    measurements = {
        "one_file_seconds": {name: [round(s, 4) for s in v] for name, v in one_file.items()},
        "batch_seconds": [round(s, 3) for s in batch_seconds],
        "nbgrader_autograde_seconds": round(autograde_seconds, 2),
        "scores": {s: {"batch": batch_scores.get(s), "nbgrader": nbgrader_scores.get(s)}
                   for s in scripts},
    }
    batch_median = results.summarize(batch_seconds)["median"]
    summary = {
        "one_file_seconds": {name: results.summarize(v) for name, v in one_file.items()},
        "students": students,
        "batch_seconds": results.summarize(batch_seconds),
        "batch_ms_per_submission": round(1000 * batch_median / students, 2),
        "nbgrader_seconds": round(autograde_seconds, 2),
        "nbgrader_seconds_per_submission": round(autograde_seconds / students, 3),
        "grades_equal": not mismatches,
        "mismatches": mismatches,
        "score_histogram": {str(k): sorted(batch_scores.values()).count(k)
                            for k in sorted(set(batch_scores.values()))},
        "targets": {"one_file_seconds": 0.3, "batch_seconds_for_200": 20},
    }
    return results.write("grading", out_dir, {"students": students, "repeats": repeats},
                         measurements, summary)
