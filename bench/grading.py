"""Grading throughput: the checker on one file, and a synthetic class graded three ways.

The class is made from the reference chain, the same every time (a fixed seed): scripts that
stop after each step, solutions with one Horovod line deleted, a syntax error, an empty
file, a missing script. It is graded by the checker's batch command (one process, reading
only), by `python -m instructor autograde --no-run` (the quick pass: nbgrader, reading only;
its grades must equal the batch's, student by student), and by `python -m instructor
autograde`, the real path: every script run for real in the sandbox (instructor/class_verdicts.py),
then nbgrader. A script that stops after step N must score N there (its truth, by
construction of the chain).

The autograde is timed in paired, alternating repetitions against an earlier commit's path
(`baseline`, a git worktree of it, with its own course built by its own code), and broken down
per student: waiting for kernels, check cells (both from instructor/plugins.py's timings),
nbgrader's own work (the rest of the runs) and ours (intake, merging, students graded alone).
"""

from __future__ import annotations

import ast
import csv
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import results
from workbook.facts import LAST_STEP, LEARNER_SCRIPT_NAME, STEPS
from workbook.facts import chain_file_name as output_name
from workbook.paths import SOLUTIONS_DIR

MISSING = None  # a student who handed in no fashion_mnist.py


def reference(step: int) -> str:
    return (SOLUTIONS_DIR / output_name(step)).read_text(encoding="utf-8")


# The kinds of script in the synthetic class, numbered in the order of its rotation (student i
# gets kind i % KINDS), all derived from the manifest's steps:
STOPPED_AFTER = tuple(range(LAST_STEP + 1))  # kind N: the chain's script after step N (its truth)
STARTER, SOLUTION = STOPPED_AFTER[0], STOPPED_AFTER[-1]  # stopped before the first, after the last
LINE_DELETED = tuple(range(SOLUTION + 1, SOLUTION + 5))  # the solution, one Horovod line deleted
SYNTAX_ERROR = LINE_DELETED[-1] + 1  # the solution with a syntax error
EMPTY = SYNTAX_ERROR + 1  # an empty fashion_mnist.py
NO_SCRIPT = EMPTY + 1  # no fashion_mnist.py at all
KINDS = NO_SCRIPT + 1
# A small class with one of each sort: the tiny setting.
TINY_KINDS = (SOLUTION, STARTER, LINE_DELETED[0], SYNTAX_ERROR, NO_SCRIPT)


def stopped_after(kind: int) -> int | None:
    """The step after which a script of this kind stops (what it scores), or None: another kind."""
    return kind if kind in STOPPED_AFTER else None


def synthetic_script(kind: int, rng: random.Random) -> str | None:
    """A fashion_mnist.py of one kind (see KINDS)."""
    if (step := stopped_after(kind)) is not None:
        return reference(step)
    if kind in LINE_DELETED:
        lines = reference(LAST_STEP).splitlines(keepends=True)
        del lines[rng.choice(_deletable_horovod_lines())]
        return "".join(lines)
    if kind == SYNTAX_ERROR:
        return reference(LAST_STEP).replace("def ", "def def ", 1)
    if kind == EMPTY:
        return ""
    if kind == NO_SCRIPT:
        return MISSING
    raise ValueError(f"no script kind {kind} (0..{KINDS - 1})")


@functools.cache
def _deletable_horovod_lines() -> tuple[int, ...]:
    """The solution's Horovod lines (not comments) whose deletion leaves code that parses: a
    mistake, not a syntax error. Found once: each parse checks the whole script."""
    lines = reference(LAST_STEP).splitlines(keepends=True)
    return tuple(
        i
        for i, line in enumerate(lines)
        if "hvd." in line
        and not line.lstrip().startswith("#")
        and _parses(lines[:i] + lines[i + 1 :])
    )


def _parses(lines: list) -> bool:
    try:
        ast.parse("".join(lines))
    except SyntaxError:
        return False
    return True


def synthetic_kinds(students: int, kinds=None) -> dict:
    """{student: kind}: student i gets kinds[i], or i % KINDS in a fixed rotation."""
    return {f"student{i:03d}": kinds[i] if kinds else i % KINDS for i in range(students)}


def synthetic_class(students: int, seed: int = 0, kinds=None) -> dict:
    """{student: script, or None for no script}, the same for the same arguments. Every script
    ends with a comment of its own: students who hand in the same bytes share one run
    (instructor/class_verdicts.py), which a real class of 200 rarely does, so none here does."""
    rng = random.Random(seed)
    scripts = {
        student: synthetic_script(kind, rng)
        for student, kind in synthetic_kinds(students, kinds).items()
    }
    return {
        student: script + f"\n# {student}\n" if script else script
        for student, script in scripts.items()
    }


BASELINE_REF = "0ee3453"  # the path before isolated kernels and parallel runs (1,393 s for 200)
BASELINE_STUDENTS = 30  # the baseline grades the class's first 30 (7 s a student at 0ee3453)


def grader_command(*args) -> list:
    return [sys.executable, "-m", "grader", *map(str, args)]


def instructor_command(*args) -> list:
    return [sys.executable, "-m", "instructor", *map(str, args)]


def cwd_of(env) -> str | None:
    """Where an instructor command runs: a baseline's worktree (`python -m` puts the working
    folder first on sys.path, before PYTHONPATH), else here."""
    return (env or {}).get("PYTHONPATH")


# Seconds a grading command may take: nbgrader's autograde of 200 students took 1,393 s here.
COMMAND_TIMEOUT_S = 3600


def timed(argv: list, ok_codes=(0,), cwd=None, env=None) -> tuple:
    started = time.perf_counter()
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            cwd=cwd,
            check=False,
            timeout=COMMAND_TIMEOUT_S,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{' '.join(map(str, argv))} did not finish in {COMMAND_TIMEOUT_S} s")
    seconds = time.perf_counter() - started
    if done.returncode not in ok_codes:
        raise RuntimeError(
            f"{' '.join(argv)} exited with {done.returncode}:\n{done.stderr[-2000:]}"
        )
    return seconds, done


def nbgrader_class(work: Path, scripts: dict, env=None) -> Path:
    """An nbgrader course whose submitted/ holds the class: released notebooks plus scripts.
    `env`: the environment of the instructor commands (a baseline's PYTHONPATH)."""
    root = work / "course"
    shutil.rmtree(root, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    roster = work / "roster.csv"
    roster.write_text(
        "id,first_name,last_name,email\n"
        + "".join(f"{s},{s},Synthetic,{s}@example.org\n" for s in scripts)
    )
    for command in (["init", root], ["generate", root], ["add-students", root, roster]):
        timed(instructor_command(*command), env=env, cwd=cwd_of(env))
    release = root / "release" / "horovod_steps"
    for student, script in scripts.items():
        folder = root / "submitted" / student / "horovod_steps"
        shutil.copytree(release, folder, ignore=shutil.ignore_patterns(LEARNER_SCRIPT_NAME))
        if script is not None:
            (folder / LEARNER_SCRIPT_NAME).write_text(script, encoding="utf-8")
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    return root


def exported_scores(root: Path, work: Path, env=None) -> dict:
    csv_path = work / "grades.csv"
    timed(instructor_command("export", root, csv_path), env=env, cwd=cwd_of(env))
    with open(csv_path, newline="", encoding="utf-8") as grades:
        return {row["student_id"]: float(row["score"] or 0) for row in csv.DictReader(grades)}


def baseline_env(work: Path, ref: str) -> dict:
    """The environment that runs `ref`'s instructor and grader: a git worktree of it first on
    PYTHONPATH (its kernels inherit it)."""
    from workbook.paths import REPO

    tree = work / f"baseline-{ref}"
    if not tree.exists():
        timed(["git", "-C", str(REPO), "worktree", "prune"])  # an earlier run's, deleted
        timed(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), ref])
        # What `make data` prepared is not in git: without it the baseline's runs would fail at
        # once and look fast.
        for prepared in (REPO / "data").iterdir():
            if not (tree / "data" / prepared.name).exists():
                (tree / "data" / prepared.name).symlink_to(prepared)
    return {**os.environ, "PYTHONPATH": str(tree)}


def autograde_once(root: Path, env=None, extra=()) -> dict:
    """One `autograde --force` of the whole class (`extra`: its other options): seconds, and
    what the path recorded. Every script is judged anew (its earlier judgement removed)."""
    shutil.rmtree(root / "logs" / "autograde" / "judged", ignore_errors=True)
    seconds, _ = timed(
        instructor_command("autograde", root, "--force", *extra), (0, 1), env=env, cwd=cwd_of(env)
    )
    logs = root / "logs" / "autograde"
    # The 1-minute load average at the end, the grading's own processes included: far above
    # its own (about 4 with 3 runs), other work shared the machine.
    measured = {"seconds": round(seconds, 2), "load_average": round(os.getloadavg()[0], 2)}
    phases = logs / "phases.json"
    timings = logs / "timings.jsonl"
    if phases.is_file():  # the current path records these; the baseline did not
        measured["phases"] = json.loads(phases.read_text())["seconds"]
        measured["jobs"] = json.loads(phases.read_text())["jobs"]
    if timings.is_file():
        rows = [json.loads(line) for line in timings.read_text().splitlines() if line.strip()]
        measured["kernel_wait"] = round(sum(row["kernel"] for row in rows), 2)
        measured["checks"] = round(sum(row["checks"] for row in rows), 2)
        measured["notebooks"] = len(rows)
    return measured


def breakdown(run: dict, students: int) -> dict:
    """Seconds per student of one autograde: kernel waits and check cells (summed over the
    parallel runs, so divided by their number to compare with the wall clock), nbgrader's own
    work (the rest of the runs) and ours (intake, merge, graded alone)."""
    phases, jobs = run["phases"], run["jobs"]
    runs = phases.get("nbgrader runs", 0.0)
    kernel, checks = run["kernel_wait"] / jobs, run["checks"] / jobs
    judging = phases.get("judging", 0.0)
    ours = sum(v for k, v in phases.items() if k not in ("nbgrader runs", "judging"))
    return {
        "total": run["seconds"] / students,
        "running and reading the scripts (judging)": judging / students,
        "waiting for kernels": kernel / students,
        "check cells": checks / students,
        "nbgrader's own": max(0.0, runs - kernel - checks) / students,
        "ours (intake, merge, alone)": ours / students,
        "start-up and export (the rest)": max(0.0, run["seconds"] - runs - ours - judging)
        / students,
    }


def paired_autograde(
    work: Path,
    scripts: dict,
    repeats: int,
    baseline_students: int,
    echo=print,
    baseline_ref: str = BASELINE_REF,
) -> dict:
    """`repeats` alternating autogrades: the baseline (`baseline_ref`, on the first
    `baseline_students` of the class, since it takes 7 s a student; 0: none) and the current
    path."""
    current_root = nbgrader_class(work / "current", scripts)
    subset = dict(list(scripts.items())[:baseline_students])
    env = baseline_env(work, baseline_ref) if subset else None
    baseline_root = nbgrader_class(work / "baseline", subset, env=env) if subset else None
    current, quick, baseline = [], [], []
    for repeat in range(repeats):
        if subset:
            baseline.append(autograde_once(baseline_root, env))
        quick.append(autograde_once(current_root, extra=("--no-run",)))
        quick_scores = exported_scores(current_root, work / "quick")
        current.append(autograde_once(current_root))
        before = (
            f"baseline {baseline_ref} {baseline[-1]['seconds'] / len(subset):.2f} s/student, "
            if subset
            else ""
        )
        echo(
            f"  grading: autograde {repeat + 1}/{repeats}: {before}quick pass (no runs) "
            f"{quick[-1]['seconds'] / len(scripts):.2f} s/student, with runs "
            f"{current[-1]['seconds'] / len(scripts):.2f} s/student"
        )
    return {
        "current_root": current_root,
        "baseline_root": baseline_root,
        "env": env,
        "current": current,
        "quick": quick,
        "quick_scores": quick_scores,
        "baseline": baseline,
        "baseline_students": len(subset),
        "baseline_ref": baseline_ref,
    }


# The one-file timings' names: the checker on the chain's solution and on its starting script.
ONE_FILE_SOLUTION = f"solution ({len(STEPS)} pass)"
ONE_FILE_STARTER = f"starter ({len(STEPS)} fail, with diffs)"


def time_one_file(repeats: int, echo=print) -> dict:
    """{name: seconds of each repeat}: `grader check` on one file, every step, interpreter start
    included."""
    solution, starter = SOLUTIONS_DIR / output_name(LAST_STEP), SOLUTIONS_DIR / output_name(0)
    one_file = {
        ONE_FILE_SOLUTION: [timed(grader_command("check", solution))[0] for _ in range(repeats)],
        ONE_FILE_STARTER: [
            timed(grader_command("check", starter), (1,))[0] for _ in range(repeats)
        ],
    }
    for name, seconds in one_file.items():
        echo(f"  grading: one file, {name}: median {results.summarize(seconds)['median']:.3f} s")
    return one_file


def time_batch(submitted: Path, repeats: int) -> tuple:
    """(seconds of each repeat, {student: score}): `grader batch` on the whole class."""
    batch_seconds = []
    for _ in range(repeats):
        seconds, done = timed(grader_command("batch", submitted, "--json"))
        batch_seconds.append(seconds)
    return batch_seconds, {g["student"]: float(g["score"]) for g in json.loads(done.stdout)}


def reading_mismatches(students: list, batch: dict, quick: dict, baseline: dict) -> dict:
    """{student: scores} where the reading's two paths (batch, nbgrader's quick pass) disagree,
    or the baseline's differs from the quick pass."""
    mismatches = {
        s: {"batch": batch.get(s), "quick": quick.get(s)}
        for s in students
        if batch.get(s) != quick.get(s)
    }
    mismatches.update(
        {
            s: {"baseline": baseline.get(s), "quick": quick.get(s)}
            for s in baseline
            if baseline[s] != quick.get(s)
        }
    )
    return mismatches


def chain_scripts_scored_wrong(kinds: dict, nbgrader_scores: dict) -> tuple:
    """(how many scripts stop after a step, {student: truth and score} of those that do not
    score that step with runs)."""
    truths = {
        s: float(step) for s, kind in kinds.items() if (step := stopped_after(kind)) is not None
    }
    wrong = {
        s: {"truth": truth, "nbgrader": nbgrader_scores.get(s)}
        for s, truth in truths.items()
        if nbgrader_scores.get(s) != truth
    }
    return len(truths), wrong


def run(
    out_dir: Path,
    tiny: bool = False,
    students: int = 200,
    repeats: int = 10,
    echo=print,
    autograde_repeats: int = 3,
    baseline_students: int = BASELINE_STUDENTS,
    baseline_ref: str = BASELINE_REF,
) -> Path:
    students = len(TINY_KINDS) if tiny else students
    repeats = 2 if tiny else repeats
    kinds = synthetic_kinds(students, TINY_KINDS if tiny else None)
    work = Path(out_dir).resolve() / "runs" / "grading"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    one_file = time_one_file(repeats, echo)

    # The class, through nbgrader's layout so that both paths read the same files.
    scripts = synthetic_class(students, kinds=TINY_KINDS if tiny else None)
    root = nbgrader_class(work, scripts)
    batch_seconds, batch_scores = time_batch(root / "submitted", max(1, repeats // 3))
    echo(
        f"  grading: batch, {students} submissions: "
        f"median {results.summarize(batch_seconds)['median']:.2f} s"
    )

    pairs = paired_autograde(
        work,
        scripts,
        1 if tiny else autograde_repeats,
        0 if tiny else baseline_students,
        echo,
        baseline_ref,
    )
    nbgrader_scores = exported_scores(pairs["current_root"], work)
    baseline_scores = (
        exported_scores(pairs["baseline_root"], work / "baseline", pairs["env"])
        if pairs["baseline_root"]
        else {}
    )
    current_seconds = [r["seconds"] for r in pairs["current"]]
    echo(
        f"  grading: nbgrader autograde, {students} submissions: median "
        f"{results.summarize(current_seconds)['median']:.1f} s"
    )
    mismatches = reading_mismatches(
        list(scripts), batch_scores, pairs["quick_scores"], baseline_scores
    )
    echo(f"  grading: grades equal for {students - len(mismatches)} of {students} students")
    # With runs: a script that stops after step N scores N (the chain's truth).
    stopped, wrong = chain_scripts_scored_wrong(kinds, nbgrader_scores)
    echo(
        f"  grading: with runs, {stopped - len(wrong)} of {stopped} scripts of the "
        "chain score their step"
    )

    measurements = grading_measurements(
        one_file, batch_seconds, pairs, scripts, batch_scores, nbgrader_scores
    )
    summary = grading_summary(
        students, one_file, batch_seconds, pairs, batch_scores, mismatches, wrong
    )
    return results.write(
        "grading",
        out_dir,
        {"students": students, "repeats": repeats, "autograde_repeats": len(current_seconds)},
        measurements,
        summary,
    )


def grading_measurements(
    one_file: dict,
    batch_seconds: list,
    pairs: dict,
    scripts,
    batch_scores: dict,
    nbgrader_scores: dict,
) -> dict:
    """What the grading benchmark measured, as its result file keeps it: the times, and each
    student's score by the batch, the quick pass and nbgrader."""
    return {
        "one_file_seconds": {name: [round(s, 4) for s in v] for name, v in one_file.items()},
        "batch_seconds": [round(s, 3) for s in batch_seconds],
        "autograde_current": pairs["current"],
        "autograde_baseline": pairs["baseline"],
        "autograde_quick": pairs["quick"],
        "scores": {
            s: {
                "batch": batch_scores.get(s),
                "quick": pairs["quick_scores"].get(s),
                "nbgrader": nbgrader_scores.get(s),
            }
            for s in scripts
        },
    }


def grading_summary(
    students: int,
    one_file: dict,
    batch_seconds: list,
    pairs: dict,
    batch_scores: dict,
    mismatches: dict,
    wrong: dict,
) -> dict:
    """The grading benchmark's summary: the timings against their targets, whether the grades
    agree, and whether runs score the chain's scripts their step."""
    return {
        "one_file_seconds": {name: results.summarize(v) for name, v in one_file.items()},
        **class_summary(students, batch_seconds, pairs),
        "grades_equal": not mismatches,
        "mismatches": mismatches,
        "runs_score_the_chains_steps": not wrong,
        "runs_wrong": wrong,
        "score_histogram": {
            str(k): sorted(batch_scores.values()).count(k)
            for k in sorted(set(batch_scores.values()))
        },
        "targets": {
            "one_file_seconds": 0.3,
            "batch_seconds_for_200": 20,
            "quick_pass_seconds_for_200": 300,
            "nbgrader_seconds_for_200": 1200,
        },
    }


def class_summary(students: int, batch_seconds: list, pairs: dict) -> dict:
    """The class's timings: the batch, the autograde with runs (per student, against the
    baseline's, and broken down) and the quick pass."""
    current_seconds = [r["seconds"] for r in pairs["current"]]
    per_student = {"current": [s / students for s in current_seconds]}
    if pairs["baseline"]:
        per_student["baseline"] = [
            r["seconds"] / pairs["baseline_students"] for r in pairs["baseline"]
        ]
    per_student_stats = {k: results.summarize(v) for k, v in per_student.items()}
    breakdowns = [breakdown(r, students) for r in pairs["current"]]
    quick_seconds = [r["seconds"] for r in pairs["quick"]]
    return {
        "students": students,
        "batch_seconds": results.summarize(batch_seconds),
        "batch_ms_per_submission": round(
            1000 * results.summarize(batch_seconds)["median"] / students, 2
        ),
        "nbgrader_seconds": results.summarize(current_seconds),
        "nbgrader_seconds_per_submission": round(
            results.summarize(current_seconds)["median"] / students, 3
        ),
        "load_average": results.summarize(
            [r["load_average"] for r in pairs["current"] if "load_average" in r]
        ),
        "autograde_seconds_per_student": per_student_stats,
        "baseline": {"ref": pairs["baseline_ref"], "students": pairs["baseline_students"]},
        "speedup_per_student": (
            round(
                per_student_stats["baseline"]["median"] / per_student_stats["current"]["median"], 2
            )
            if "baseline" in per_student
            else None
        ),
        "seconds_per_student_breakdown": {
            part: results.summarize([b[part] for b in breakdowns]) for part in breakdowns[0]
        },
        "quick_pass_seconds": results.summarize(quick_seconds),
        "quick_pass_seconds_per_submission": round(
            results.summarize(quick_seconds)["median"] / students, 3
        ),
    }
