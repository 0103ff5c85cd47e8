"""Autograding the class with nbgrader: one run over every submission, failures alone after.

nbgrader grades the class in one process with one shared kernel (instructor/plugins.py), a few
seconds per student. It fails a student whose notebook it cannot read and goes on with the
others; a notebook with another nbgrader version's metadata would stop its whole run, so such a
submission is set aside beforehand. Every student nbgrader did not grade in that run is then
graded alone, with its own log and reason; a failure leaves no partial grade behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from instructor.course import Course, CourseError
from instructor.submission import notebook_problems
from workbook.facts import with_safe_env

LOG_DIR = Path("logs") / "autograde"
STATUS_FILE = LOG_DIR / "status.json"  # the last autograde of each student
CLASS_LOG = LOG_DIR / "class.log"

# Time limits of one nbgrader run. A student takes 2-10 s (12 checks, 2 busy cores); the checks
# never run the learner's script, so only a wedged kernel or machine comes near these.
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
            return f"{self.student}: NOT GRADED, {self.reason} (log: {self.log})"
        score = f"{self.score:g}/{self.max_score:g}" if self.score is not None else "?"
        extra = " (graded before; --force regrades)" if self.status == "skipped" else ""
        return f"{self.student}: {score}{extra}"


def autograde(course: Course, students=None, force: bool = False, echo=print) -> list:
    """Autogrades `students` (all of submitted/ by default); one failure changes nobody else's
    run. Returns an Outcome per student, in their order, and saves them in STATUS_FILE."""
    students = list(students or course.submitted_students())
    if not students:
        raise CourseError(f"nothing to grade in {course.root / 'submitted'} (collect first)")
    missing = [s for s in students if not course.folder("submitted", s).is_dir()]
    if missing:
        raise CourseError(f"no submission of {', '.join(missing)} in {course.root / 'submitted'}")
    stoppers = {
        s for s in students
        if any(p.stops_nbgrader for p in notebook_problems(course.folder("submitted", s)))
    }
    together = [s for s in students if s not in stoppers]
    graded = grade_together(course, together, force) if len(together) > 1 else {}
    outcomes = []
    for student in students:
        outcome = graded.get(student) or grade_alone(course, student, force)
        echo(str(outcome))
        outcomes.append(outcome)
    save_status(course, outcomes)
    return outcomes


def run_nbgrader(course: Course, args: list, log: Path, timeout: float) -> int | None:
    """`nbgrader autograde ARGS` in the course folder, its output in `log`; its exit status,
    or None when it ran out of time (then it is killed, with the kernels it started).

    A subprocess, not NbGraderAPI.autograde: a run gets a time limit and a log of its own,
    and the shared kernel (instructor/plugins.py) lives and dies with the process."""
    import psutil

    log.parent.mkdir(parents=True, exist_ok=True)
    env = with_safe_env()
    # Kernels start from this Python's folder: the environment with grader installed.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    command = [sys.executable, "-m", "nbgrader", "autograde", course.assignment, *args]
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(
            command, cwd=course.root, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Kernels run in sessions of their own: find them before their parent goes.
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
            out.write(f"\n[instructor] stopped: no result after {timeout:.0f} s\n")
            return None


def grade_together(course: Course, students: list, force: bool) -> dict:
    """One nbgrader run over `students`: {student: Outcome} of those it graded."""
    others = sorted(set(course.submitted_students()) - set(students))
    args = ["--force"] if force else []
    if others:
        args.append("--CourseDirectory.student_id_exclude=" + ",".join(others))
    log = course.root / CLASS_LOG
    limit = RUN_START_SECONDS + SECONDS_PER_STUDENT * len(students)
    status = run_nbgrader(course, args, log, limit)
    output = log.read_text(encoding="utf-8", errors="replace")
    failed = set(re.findall(r"error processing assignment '[^']*' for student '([^']*)'", output))
    folders = rf"{re.escape(str(course.root))}/(?:submitted|autograded)/([^/\s]+)/"
    reached = re.findall(folders, output)  # in the order nbgrader went
    # nbgrader lists the students it failed once it has been through them all; without that
    # list, a failed run stopped at the last student it reached, whose grades are partial.
    finished = status == 0 or bool(failed)
    unsure = set() if finished or not reached else {reached[-1]}
    for student in unsure:
        shutil.rmtree(course.folder("autograded", student), ignore_errors=True)
    outcomes = {}
    with course.gradebook() as gradebook:
        for student in students:
            if student in failed | unsure or not course.folder("autograded", student).is_dir():
                continue
            if not finished and student not in reached:
                continue  # an earlier run's grades: this run never got there
            outcome = graded_outcome(course, gradebook, student, output, CLASS_LOG)
            if outcome is not None:
                outcomes[student] = outcome
    return outcomes


def graded_outcome(course: Course, gradebook, student: str, output: str, log: Path):
    """The Outcome of a student nbgrader graded (or skipped), from the gradebook."""
    from nbgrader.api import MissingEntry

    try:
        submission = gradebook.find_submission(course.assignment, student)
    except MissingEntry:
        return None
    skipped = f"Skipping existing assignment: {course.folder('autograded', student)}"
    status = "skipped" if skipped in output else "graded"
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
            outcome = graded_outcome(course, gradebook, student, output, log)
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
