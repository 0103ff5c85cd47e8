"""Autograding the class with nbgrader: parallel runs over disjoint students, failures alone.

Before grading, each submission is screened (instructor/intake.py): links out of it, FIFOs,
devices and huge files are set aside. Then `jobs` nbgrader processes (one per core by default)
grade disjoint groups of students at once, each with a copy of the gradebook; each student a
run graded is copied into the course's gradebook (instructor/merge.py). Whether a run graded,
skipped or failed a student is read from what nbgrader leaves (the student's autograded folder,
the gradebook), not from its log. Every student a run did not grade is then graded alone, with
its own log and reason; a failure leaves no partial grade behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from instructor import class_verdicts, intake, merge
from instructor.course import Course, CourseError
from instructor.submission import notebook_problems
from workbook.facts import usable_cores, with_safe_env

LOG_DIR = Path("logs") / "autograde"
STATUS_FILE = LOG_DIR / "status.json"  # the last autograde of each student
TIMINGS_FILE = LOG_DIR / "timings.jsonl"  # per notebook: kernel wait and check seconds
PHASES_FILE = LOG_DIR / "phases.json"  # seconds of the last autograde's phases

# Time limits of one nbgrader run. A student takes 1-3 s (12 checks, 2 busy cores); the checks
# never run the learner's script and are bounded (grader/reading/budget.py), so only a wedged kernel or
# machine comes near these.
RUN_START_SECONDS = 120
SECONDS_PER_STUDENT = 60


@dataclass
class Outcome:
    student: str
    status: str  # "graded", "skipped" (graded before, nothing newer) or "failed"
    score: float | None = None
    max_score: float | None = None
    reason: str = ""
    log: str = ""
    bad_notebooks: list = field(default_factory=list)  # file names nbgrader could not grade

    def __str__(self) -> str:
        if self.status == "failed":
            log = f" (log: {self.log})" if self.log else ""
            return f"{self.student}: NOT GRADED, {self.reason}{log}"
        score = f"{self.score:g}/{self.max_score:g}" if self.score is not None else "?"
        extra = " (graded before; --force regrades)" if self.status == "skipped" else ""
        return f"{self.student}: {score}{extra}"


def autograde(
    course: Course,
    students=None,
    force: bool = False,
    echo=print,
    jobs: int | None = None,
    runs: bool = True,
    sandbox=None,
    run_jobs: int | None = None,
    run_timeout: float | None = None,
) -> list:
    """Autogrades `students` (all of submitted/ by default); one failure changes nobody else's
    run. Returns an Outcome per student, in their order, and saves them in STATUS_FILE.

    First each student's script is judged (instructor/class_verdicts.py): run for real in `sandbox`
    (runs=True; `run_jobs` at once, default class_verdicts.default_run_jobs(); each stopped after
    `run_timeout` seconds, default the run check's) and read; the check
    cells then return those decided verdicts. runs=False: the reading alone decides (a quick,
    advisory pass)."""
    if "sanitize_preprocessors" not in course.config.get("Autograde", {}):
        raise CourseError(
            f"{course.root / 'nbgrader_config.py'} was written by an older workbook, without the "
            "sanitizer that keeps a student's cell metadata from changing grades: rewrite it with "
            f"`python -m instructor init --force {course.root}` (submissions and grades stay)"
        )
    clock = Phases()
    set_aside = intake.screen_class(course.root / "submitted", course.root / "set_aside")
    clock.lap("intake")
    for student, items in set_aside.items():
        echo(f"{student}: set aside before grading: " + "; ".join(map(str, items)))
    students = list(students or course.submitted_students())
    if not students:
        raise CourseError(f"nothing to grade in {course.root / 'submitted'} (collect first)")
    missing = [s for s in students if not course.folder("submitted", s).is_dir()]
    if missing:
        raise CourseError(f"no submission of {', '.join(missing)} in {course.root / 'submitted'}")
    (course.root / TIMINGS_FILE).unlink(missing_ok=True)
    judged = class_verdicts.judge_class(
        course,
        students,
        runs=runs,
        sandbox=sandbox,
        echo=echo,
        jobs=run_jobs or class_verdicts.default_run_jobs(),
        run_timeout=run_timeout,
    )
    clock.lap("judging")
    if not runs:
        echo("Graded by reading the scripts only (no runs): these grades are advisory.")
    # A student whose run could not be judged is not graded (the others are): no grade may rest
    # on a run nobody saw.
    unjudged = {j.student: j.problem for j in judged if j.problem}
    graded = grade_in_parallel(
        course, [s for s in students if s not in unjudged], force, jobs or default_jobs(), clock
    )
    outcomes = []
    for student in students:
        if student in unjudged:
            outcome = not_graded(course, student, unjudged[student])
        else:
            outcome = graded.get(student) or grade_alone(course, student, force)
        echo(str(outcome))
        outcomes.append(outcome)
    clock.lap("alone")
    save_status(course, outcomes)
    clock.save(course.root / PHASES_FILE, jobs=jobs or default_jobs(), students=len(students))
    return outcomes


class Phases:
    """Wall-clock seconds of autograde's phases, for the grading benchmark."""

    def __init__(self):
        self.seconds, self._last = {}, time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self._last
        self._last = now

    def save(self, path: Path, **context) -> None:
        rounded = {name: round(value, 3) for name, value in self.seconds.items()}
        path.write_text(json.dumps({**context, "seconds": rounded}, indent=2) + "\n")


def default_jobs() -> int:
    """One run more than cores: a run spends part of its time waiting for its kernel."""
    return usable_cores() + 1


def nbgrader_command(course: Course, args: list) -> list:
    """`nbgrader autograde ARGS` for this course. `-P`: the course folder, where nbgrader runs,
    is not put on sys.path (its config file is read as configuration, not imported)."""
    timings = course.root / TIMINGS_FILE
    judged = course.root / class_verdicts.JUDGED_DIR
    return [
        sys.executable,
        "-P",
        "-m",
        "nbgrader",
        "autograde",
        course.assignment,
        f"--ExecuteChecksOnly.timings_file={timings}",
        f"--ExecuteChecksOnly.judged_dir={judged}",
        *args,
    ]


def start_nbgrader(course: Course, args: list, log: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    env = with_safe_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.Popen(
            nbgrader_command(course, args),
            cwd=course.root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def finish(process: subprocess.Popen, log: Path, deadline: float) -> int | None:
    """The run's exit status, or None when it ran past `deadline` (time.monotonic()); then it
    is killed with everything it started (its session: nbgrader, kernels, checks)."""
    import psutil

    try:
        return process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        try:
            family = [process, *psutil.Process(process.pid).children(recursive=True)]
        except psutil.NoSuchProcess:  # it ended in the meantime
            family = [process]
        for member in family:
            try:
                member.kill()
            except (psutil.NoSuchProcess, ProcessLookupError):
                pass
        process.wait()
        with open(log, "a", encoding="utf-8") as out:
            out.write("\n[instructor] stopped: no result in time\n")
        return None


def run_nbgrader(course: Course, args: list, log: Path, timeout: float) -> int | None:
    """One nbgrader run, waited for: its exit status, or None when it ran out of time."""
    return finish(start_nbgrader(course, args, log), log, time.monotonic() + timeout)


def folder_identity(folder: Path):
    """What tells a folder nbgrader made anew from one it left alone (None: no folder)."""
    try:
        info = folder.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_ctime_ns)


def grade_in_parallel(
    course: Course, students: list, force: bool, jobs: int, clock: Phases
) -> dict:
    """`jobs` nbgrader runs over disjoint groups of `students`, merged into the course's
    gradebook: {student: Outcome} of those graded (or skipped) for sure."""
    groups = [students[i::jobs] for i in range(min(jobs, len(students)))]
    everyone = set(course.submitted_students())
    before = {s: folder_identity(course.folder("autograded", s)) for s in students}
    clock.lap("intake")
    db_file = course.root / "gradebook.db"
    runs = []
    for number, group in enumerate(groups, start=1):
        worker_db = course.root / LOG_DIR / f"worker-{number}.db"
        worker_db.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(db_file, worker_db)
        args = [f"--CourseDirectory.db_url=sqlite:///{worker_db}"] + (["--force"] if force else [])
        others = sorted(everyone - set(group))
        if others:
            args.append("--CourseDirectory.student_id_exclude=" + ",".join(others))
        log = course.root / LOG_DIR / f"worker-{number}.log"
        deadline = time.monotonic() + RUN_START_SECONDS + SECONDS_PER_STUDENT * len(group)
        runs.append((group, worker_db, log, deadline, start_nbgrader(course, args, log)))
    statuses = [finish(process, log, deadline) for _, _, log, deadline, process in runs]
    clock.lap("nbgrader runs")
    outcomes = {}
    for (group, worker_db, log, _, _), status in zip(runs, statuses):
        outcomes.update(_collect(course, group, before, worker_db, log, status))
        worker_db.unlink(missing_ok=True)
    clock.lap("merge")
    return outcomes


def _collect(
    course: Course, group: list, before: dict, worker_db: Path, log: Path, status: int | None
) -> dict:
    """The Outcomes of one run's students, its grades copied into the course's gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    after = {s: folder_identity(course.folder("autograded", s)) for s in group}
    remade = [s for s in group if after[s] not in (None, before[s])]
    kept = [s for s in group if before[s] is not None and after[s] == before[s]]
    if status is None and remade:
        # Stopped: the student it was working on is unsure; nbgrader goes one at a time.
        last = max(remade, key=lambda s: after[s][1])
        shutil.rmtree(course.folder("autograded", last), ignore_errors=True)
        remade.remove(last)
    relative = log.relative_to(course.root)
    outcomes = {}
    with (
        Gradebook(f"sqlite:///{worker_db}", course.course_id) as source,
        course.gradebook() as target,
    ):
        for student in remade:
            try:
                merge.copy_submission(source, target, course.assignment, student)
            except MissingEntry:
                continue
            outcomes[student] = _outcome(target, course, student, "graded", relative)
        for student in kept:
            outcome = _outcome(target, course, student, "skipped", relative)
            if outcome is not None:
                outcomes[student] = outcome
    return {s: o for s, o in outcomes.items() if o is not None}


def _outcome(gradebook, course: Course, student: str, status: str, log: Path):
    from nbgrader.api import MissingEntry

    try:
        submission = gradebook.find_submission(course.assignment, student)
    except MissingEntry:
        return None
    return Outcome(student, status, submission.score, submission.max_score, log=str(log))


def grade_alone(course: Course, student: str, force: bool) -> Outcome:
    """Autogrades one student in a run of its own; a failure leaves no partial grades."""
    from nbgrader.api import MissingEntry

    log = LOG_DIR / f"{student}.log"
    args = ["--student", student] + (["--force"] if force else [])
    status = run_nbgrader(course, args, course.root / log, RUN_START_SECONDS + SECONDS_PER_STUDENT)
    output = (course.root / log).read_text(encoding="utf-8", errors="replace")
    graded_dir = course.folder("autograded", student)
    with course.gradebook() as gradebook:
        if status == 0 and graded_dir.is_dir():
            outcome = _outcome(gradebook, course, student, "graded", log)
            if outcome is not None:
                return outcome
        # The notebooks nbgrader graded before it failed left grades: no export may show them.
        try:
            gradebook.remove_submission(course.assignment, student)
        except MissingEntry:
            pass
    for stale in (graded_dir, course.folder("feedback", student)):
        shutil.rmtree(stale, ignore_errors=True)
    problems = notebook_problems(course.folder("submitted", student))
    if problems:
        reason = "unusable notebook " + "; ".join(map(str, problems))
    elif status is None:
        reason = f"nbgrader gave no result within {RUN_START_SECONDS + SECONDS_PER_STUDENT} s"
    else:
        reason = failure_reason(output)
    bad = [problem.notebook for problem in problems]
    return Outcome(student, "failed", reason=reason, log=str(log), bad_notebooks=bad)


def not_graded(course: Course, student: str, why: str) -> Outcome:
    """The Outcome of a student whose run could not be judged; grades of theirs from an
    earlier grading go (the submission they were for was replaced)."""
    from nbgrader.api import MissingEntry

    with course.gradebook() as gradebook:
        try:
            gradebook.remove_submission(course.assignment, student)
        except MissingEntry:
            pass
    for stale in (course.folder("autograded", student), course.folder("feedback", student)):
        shutil.rmtree(stale, ignore_errors=True)
    return Outcome(
        student, "failed", reason=f"{why}; then: {class_verdicts.regrade_command(course, student)}"
    )


_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception)): (.*)$")
_ERROR_LINE = re.compile(r"^\[\w+ \| ERROR\] (.*)$")
_GENERIC_ERRORS = ("There was an error processing", "Please see the", "Traceback")


def failure_reason(output: str) -> str:
    """Why nbgrader failed, from its output: the last exception of a traceback, else the last
    error it logged (e.g. 'One or more notebooks ... use an old version of the nbgrader metadata').
    """
    lines = output.splitlines()
    exceptions = [m.group(1, 2) for line in lines if (m := _EXCEPTION_LINE.match(line.strip()))]
    if exceptions:
        reason = ": ".join(exceptions[-1])
    else:
        reason = ""
        for index, line in enumerate(lines):
            match = _ERROR_LINE.match(line)
            if match and not match.group(1).startswith(_GENERIC_ERRORS):
                following = []
                for more in lines[index + 1 :]:
                    if not more.startswith((" ", "\t")) or not more.strip():
                        break
                    following.append(more.strip())
                reason = " ".join([match.group(1).strip(), *following])
        if not reason:
            return "nbgrader could not grade this submission"
    return reason if len(reason) <= 160 else reason[:157] + "..."


def save_status(course: Course, outcomes: list) -> None:
    status = load_status(course)
    for outcome in outcomes:
        status[outcome.student] = {
            "status": outcome.status,
            "reason": outcome.reason,
            "log": outcome.log,
            "bad_notebooks": outcome.bad_notebooks,
        }
    path = course.root / STATUS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(status, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def load_status(course: Course) -> dict:
    """{student: {"status", "reason", "log", "bad_notebooks"}} of each student's last autograde."""
    try:
        return json.loads((course.root / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
