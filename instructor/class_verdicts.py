"""Before nbgrader grades: each submission's script run for real, its steps decided.

Every student's fashion_mnist.py runs once in the sandbox (grader/running/sandbox.py, the course
hidden) through the run-for-real check, which shows all the steps at once; grader.judge_file
decides each step from the run where it shows it and from the reading elsewhere. The decided
verdicts are saved as logs/autograde/judged/<student>.json, in the course (never in a
submission); the grading kernel is told where (plugins.ExecuteChecksOnly) and each check cell's check_step(N) returns the
decided verdict of step N, so nbgrader's score and feedback come from behaviour.

A script judged before with the same contents (and the same time limit) is not run again, and
the scripts of students who handed in the same bytes are run once. With runs=False (a quick
pass) only the reading decides, and every verdict says so: such grades are advisory.

One student's run fails that student alone: whatever goes wrong while their run is prepared,
run, read or cleaned up, they are not judged (Judged.problem, with the command that judges them
again), and the others are. Whether this machine can run a script at all is asked once, of the
reference solution (the canary, run only when a student's run could not be made): when even
it can't run, no run of the class can, and the class stops with that reason.
The saved judgement notes the limits the run reached ("limits") and whose run a twin shares
("twin_of"), for the class report.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.api import NEITHER, RUN_TIMEOUT_S
from instructor.course import Course, CourseError
from workbook.facts import LEARNER_SCRIPT_NAME, usable_cores

JUDGED_DIR = Path("logs") / "autograde" / "judged"
NOT_JUDGED = "its run could not be judged"  # how a student's reason begins (the class report)


@dataclass
class Judged:
    student: str
    ran: bool  # a real run decided (else the reading alone: advisory)
    seconds: float
    reused: bool  # judged before, the same script
    undecided: list  # steps neither check could decide
    problem: str = ""  # why the student's run could not be judged ("": it was)
    limits: list = field(default_factory=list)  # the limits the run reached ("time", "memory"...)
    twin_of: str = ""  # the student whose identical script's run this one shares


def judged_path(course: Course, student: str) -> Path:
    return course.root / JUDGED_DIR / f"{student}.json"


def script_of(course: Course, student: str) -> Path:
    return course.folder("submitted", student) / LEARNER_SCRIPT_NAME


def fingerprint(script: Path) -> str:
    """The script's SHA-256 ("" when it is missing or not a plain file)."""
    try:
        if script.is_symlink() or not script.is_file():
            return ""
        return hashlib.sha256(script.read_bytes()).hexdigest()
    except OSError:
        return ""


def load(course: Course, student: str) -> dict | None:
    """The saved judgement of `student`: {"sha256", "ran", "run_timeout", "seconds",
    "results"}, or None."""
    try:
        return json.loads(judged_path(course, student).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def default_run_jobs() -> int:
    """Runs at once: one more than the cores hold at 2 workers each, since a run also waits
    (for its launch, its imports, its second launch). On 2 cores, 2 at once judged 4 scripts in
    22-26 s each against 33-36 s one at a time (2 alternating pairs, load 5-7)."""
    from grader.api import RUN_WORKERS

    return usable_cores() // RUN_WORKERS + 1


def judge_class(
    course: Course,
    students: list,
    *,
    runs: bool = True,
    sandbox=None,
    jobs: int = 1,
    run_timeout: float | None = None,
    echo=print,
) -> list:
    """Judges each student's script, `jobs` runs at a time (each in a box of its own, like
    `sandbox`, default grading_sandbox(course), and stopped after `run_timeout` seconds,
    default the run check's RUN_TIMEOUT_S); returns a Judged per student, in order.

    Identical scripts are judged once: the run sees the script alone (grader/running/run_check.py
    copies it into a folder of its own), so the same bytes do the same, whoever handed them in
    (the untouched starting script, say)."""
    from concurrent.futures import ThreadPoolExecutor

    how = JudgedWith(runs, (run_timeout or RUN_TIMEOUT_S) if runs else None)
    canary = Canary(how.run_timeout)
    if runs and sandbox is None:
        sandbox = grading_sandbox(course)
    if runs and sandbox.weaker:
        echo(f"The students' scripts run in a weaker sandbox: {sandbox.weaker}")
    digests = {student: fingerprint(script_of(course, student)) for student in students}
    first = {}  # digest: the first student who handed it in
    for student in students:
        first.setdefault(digests[student] or student, student)
    own = [student for student in students if first[digests[student] or student] == student]
    own_set = set(own)
    # Reading alone takes milliseconds: one at a time.
    with ThreadPoolExecutor(max_workers=max(1, jobs) if runs else 1) as pool:
        # A box per run: its mounts and cgroups are released when that run ends.
        boxes = [_box(sandbox) for _ in own]
        judged_own = pool.map(
            lambda student, box: _judge_one(course, student, how, box, canary), own, boxes
        )
        judged = []
        # Said in the students' order (a run that ends early waits for the ones before it).
        for student in students:
            if student in own_set:
                summary, said = next(judged_own)
            else:
                twin = _as_judged(course, student, first[digests[student]], how)
                summary, said = twin or _judge_one(course, student, how, _box(sandbox), canary)
            if said:
                echo(said)
            judged.append(summary)
        return judged


@dataclass(frozen=True)
class JudgedWith:
    """How a class is judged: a saved judgement made otherwise is made again."""

    runs: bool
    run_timeout: float | None  # seconds; None without runs

    def made(self, saved: dict | None, digest: str) -> bool:
        """Whether `saved` was judged this way, of the script whose SHA-256 is `digest`."""
        return bool(
            saved
            and digest
            and saved.get("sha256") == digest
            and saved.get("ran") == self.runs
            and saved.get("run_timeout") == self.run_timeout
        )


def _box(sandbox):
    """A box for one run, like `sandbox` (None: none)."""
    return sandbox.fresh() if sandbox else None


class Canary:
    """Whether this machine can run a script at all: the reference solution, run once in a
    sandbox like the students' (asked only when a student's run could not be made)."""

    def __init__(self, run_timeout: float | None):
        self.run_timeout, self._lock, self._answer = run_timeout, threading.Lock(), None

    def machine_problem(self, sandbox) -> str:
        """ "" when the reference runs here; else why it does not (the same for every student)."""
        with self._lock:
            if self._answer is None:
                self._answer = self._ask(sandbox)
            return self._answer

    def _ask(self, sandbox) -> str:
        from grader.api import NOT_RUN, reference_path, run_step
        from workbook.facts import LAST_STEP

        box = _box(sandbox)
        try:
            result = run_step(
                LAST_STEP,
                reference_path(LAST_STEP),
                quiet=True,
                sandbox=box,
                **({"timeout": self.run_timeout} if self.run_timeout else {}),
            )
        except Exception as error:  # noqa: BLE001 (any failure: this machine's)
            return f"{type(error).__name__}: {error}"
        finally:
            if box is not None:
                box.close()
        if result.run is not None and result.run.outcome == NOT_RUN:
            return result.message
        return ""


def _as_judged(course: Course, student: str, twin: str, how: JudgedWith) -> tuple | None:
    """(Judged, what to say) of a script identical to `twin`'s, judged just before: its
    verdicts, about this student's script; None when the twin's can't be read."""
    data = load(course, twin)
    if not data:
        return None
    saved = load(course, student)
    if how.made(saved, data.get("sha256")):
        return _summary(student, saved, reused=True), ""
    script = str(script_of(course, student))
    data["results"] = [_about(item, script) for item in data.get("results") or []]
    data["seconds"] = 0.0
    data["twin_of"] = twin
    _save(course, student, data)
    passed = sum(item.get("passed", False) for item in data["results"])
    return _summary(student, data, reused=True), (
        f"{student}: judged as {twin}'s identical script, {passed}/{len(data['results'])} steps"
    )


def _about(result: dict, script: str) -> dict:
    """A Result's dict (details included) about `script` instead of its twin's."""
    return {
        **result,
        "path": script if result.get("path") else result.get("path", ""),
        "details": [_about(detail, script) for detail in result.get("details") or []],
    }


def _save(course: Course, student: str, data: dict) -> None:
    path = judged_path(course, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _judge_one(course: Course, student: str, how: JudgedWith, sandbox, canary: Canary) -> tuple:
    """(Judged, what to say of it: "" when judged before). A run that could not be made
    leaves the student not judged (unless the canary says no run can be made here: then the
    class stops)."""
    from grader.api import check_all, decide, judge_file

    script = script_of(course, student)
    digest = fingerprint(script)
    saved = load(course, student)
    if how.made(saved, digest):
        return _summary(student, saved, reused=True), ""
    started = time.monotonic()
    limits = []
    if how.runs:
        try:
            results = judge_file(script, sandbox=sandbox, timeout=how.run_timeout)
        except Exception as error:  # noqa: BLE001 (RunUnavailable, or anything: theirs alone)
            return _not_judged(course, student, f"{type(error).__name__}: {error}", sandbox, canary)
        finally:
            if sandbox is not None:
                sandbox.close()  # this run's mounts and cgroups
        limits = sandbox.hit() if sandbox is not None else []
    else:
        results = decide(check_all(script), None)
    data = {
        "sha256": digest,
        "ran": how.runs,
        "run_timeout": how.run_timeout,
        "seconds": round(time.monotonic() - started, 1),
        "limits": limits,
        "results": [result.to_dict() for result in results],
    }
    run = getattr(results, "run", None)  # grader.judge_file's: re-runs, code not the script's
    if run is not None:
        data["run"] = {
            "reruns": run.reruns,
            "foreign": run.foreign,
            "copy_of": run.copy_of,
            "swapped": run.swapped,
        }
    _save(course, student, data)
    summary = _summary(student, data, reused=False)
    undecided = f", undecided: steps {summary.undecided}" if summary.undecided else ""
    passed = sum(item.get("passed", False) for item in data["results"])
    way = "run and read" if how.runs else "read only (advisory)"
    return summary, (
        f"{student}: judged, {way}, {passed}/{len(results)} steps{undecided} "
        f"({data['seconds']:.0f} s)"
    )


def regrade_command(course: Course, student: str) -> str:
    """The command that judges and grades one student again."""
    return f"python -m instructor autograde {course.root} --student {student} --force"


def _not_judged(course: Course, student: str, why: str, sandbox, canary: Canary) -> tuple:
    """(Judged, what to say) of a student whose run could not be made; CourseError for the
    class when the canary can't run either."""
    machine = canary.machine_problem(sandbox)
    if machine:
        raise CourseError(
            f"no script can be run for grading on this machine: the reference "
            f"solution's run failed too ({machine}); {student}'s: {why} "
            "(--no-run grades by reading only, advisory)"
        )
    judged_path(course, student).unlink(missing_ok=True)  # no older judgement stands for it
    problem = f"{NOT_JUDGED}: {why}"
    return (
        Judged(student, False, 0.0, False, [], problem=problem),
        f"{student}: NOT JUDGED, {problem}; the reference ran here, so it is this "
        f"submission's run: see it, then `{regrade_command(course, student)}`",
    )


def grading_sandbox(course: Course):
    """The box every student's run goes into (grader/running/sandbox.py): the course, with its
    gradebook and the other students' folders, is hidden in it."""
    from grader.api import HIDDEN, Sandbox

    return Sandbox(hidden=(*HIDDEN, course.root))


def _summary(student: str, data: dict, reused: bool) -> Judged:
    results = data.get("results") or []
    undecided = [item.get("step") for item in results if item.get("decided_by") == NEITHER]
    return Judged(
        student,
        bool(data.get("ran")),
        float(data.get("seconds") or 0),
        reused,
        undecided,
        limits=list(data.get("limits") or []),
        twin_of=str(data.get("twin_of") or ""),
    )
