"""The instructor's side: the workbook as an nbgrader course, run through nbgrader's own CLI.

    python -m grader course init DIR            source/, nbgrader_config.py
    python -m grader course generate DIR        nbgrader generate_assignment
    python -m grader course add-students DIR roster.csv | ID...
    python -m grader course release DIR         nbgrader release_assignment (to the exchange)
    python -m grader course collect DIR         nbgrader collect --update
    python -m grader course zip-collect DIR ZIP nbgrader zip_collect (an LMS download)
    python -m grader course autograde DIR       nbgrader autograde (the class in one run; failures alone)
    python -m grader course feedback DIR        nbgrader generate_feedback
    python -m grader course export DIR CSV      nbgrader export
    python -m grader course report DIR          where the class got stuck: CSV, heatmap, summary

The course is one assignment, the twelve step notebooks and the learner's fashion_mnist.py.
Every command runs the real `nbgrader` in DIR, so the course behaves the same when an
instructor types nbgrader's commands there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from workbook.paths import NOTEBOOKS_DIR, STARTER_SCRIPT
from workbook.step_chain import LAST_STEP

COURSE_ID = "horovod_workbook"
ASSIGNMENT = "horovod_steps"  # students fetch it into ./horovod_steps
LEARNER_SCRIPT = "fashion_mnist.py"
CONFIG_FILE = "nbgrader_config.py"
ALL_STEPS = tuple(range(1, LAST_STEP + 1))
STATUS_FILE = Path("logs") / "autograde" / "status.json"  # the last autograde of each student

# Seconds a graded cell may run: a check takes well under a second, a loaded machine 10 times more.
CELL_TIMEOUT = 60

# What an LMS download looks like: a zip with one folder per student id, the files inside it
# (subfolders are fine), e.g. alice/01_initialize_horovod.ipynb, alice/fashion_mnist.py.
# nbgrader matches the regexp against the absolute path of each extracted file.
ZIP_REGEXP = r".*/extracted/[^/]+/(?P<student_id>[^/]+)/(?:.*/)?(?P<file_id>[^/]+)$"

# stderr that TensorFlow, absl, Horovod and Python's warnings print, which would make nbgrader
# score a check cell 0. IgnorePattern drops a stderr output when one of these matches a line.
IGNORED_STDERR_LINES = [
    (r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] ", "TensorFlow's C++ log"),
    (r"^To enable the following instructions: ", "line 2 of its CPU-features message"),
    (r"^[IWE]\d{4} [\d:.]+ +\d+ \S+:\d+\] ", "absl's C++ log"),
    (r"^WARNING: All log messages before absl::InitializeLog\(\) is called", "absl"),
    (r"^(WARNING|INFO):(tensorflow|absl):", "their Python loggers"),
    (r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [DIWE] ", "Horovod's log"),
    (r":\d+: \w*Warning: ", "Python warnings: file.py:12: UserWarning: ..."),
]
IGNORED_STDERR = "(?m)" + "|".join(regexp for regexp, _ in IGNORED_STDERR_LINES)


def raw_string(text: str) -> str:
    """`text` as a raw string literal for the config file."""
    if '"' in text or text.endswith("\\"):
        raise ValueError(f"cannot write {text!r} as a raw string")
    return f'r"{text}"'


CONFIG_TEMPLATE = """\
# nbgrader's configuration of the Horovod workbook's course.
# Written by `python -m grader course init`; nbgrader reads it when run in this folder.
from grader.nbgrader_plugins import autograde_preprocessors

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = {course_id!r}
# Run outputs (training logs, checkpoints) of the notebooks are not part of a submission.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "logs"]

# release_assignment, fetch_assignment, submit and collect meet here (no root needed).
c.Exchange.root = {exchange!r}

# The learner's script is the work: grade the submitted one, never the starter in source/.
c.Autograde.exclude_overwriting = {{{assignment!r}: [{script!r}]}}
# Run the graded check cells only: the grade depends on fashion_mnist.py alone, the other
# cells train for minutes, and a cell a learner adds cannot change what a check says.
c.Autograde.autograde_preprocessors = autograde_preprocessors()
c.Execute.timeout = {timeout}  # seconds per check cell
# A check cell the learner deleted is put back and graded like the others.
c.OverwriteCells.add_missing_cells = True
# Library warnings on stderr would score a check cell 0.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = "(?m)" + "|".join(
    [
{pattern}
    ]
)

# zip_collect: downloaded/{assignment}/archive/*.zip holds one folder per student id.
c.FileNameCollectorPlugin.named_regexp = {zip_regexp}
c.FileNameCollectorPlugin.valid_ext = [".ipynb", ".py"]
"""


class CourseError(Exception):
    """A course command that cannot go on (missing course, bad arguments); one line for the user."""


@dataclass
class Course:
    """An nbgrader course folder made by `init`."""

    root: Path
    course_id: str = COURSE_ID
    assignment: str = ASSIGNMENT

    @classmethod
    def open(cls, root) -> "Course":
        """The course in `root`, with the course id its nbgrader_config.py sets."""
        root = Path(root).resolve()
        if not (root / CONFIG_FILE).is_file():
            raise CourseError(f"{root} is not a course: no {CONFIG_FILE} (run `course init` first)")
        from traitlets.config.loader import PyFileConfigLoader

        config = PyFileConfigLoader(CONFIG_FILE, path=str(root)).load_config()
        return cls(root, config.CourseDirectory.get("course_id", COURSE_ID))

    def folder(self, kind: str, student: str | None = None) -> Path:
        """nbgrader's folder of the assignment: source, release, submitted, autograded..."""
        if student is None:
            return self.root / kind / self.assignment
        return self.root / kind / student / self.assignment

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.root / 'gradebook.db'}"

    def submitted_students(self) -> list:
        submitted = self.root / "submitted"
        if not submitted.is_dir():
            return []
        return sorted(p.name for p in submitted.iterdir() if (p / self.assignment).is_dir())

    def nbgrader(self, *args, log: Path | None = None) -> subprocess.CompletedProcess:
        """Runs `nbgrader ARGS` in the course folder; its output goes to `log`, or to ours."""
        command = [sys.executable, "-m", "nbgrader", *map(str, args)]
        env = dict(os.environ)
        # Kernels start from this Python's folder: the environment with grader installed.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        if log is None:
            return subprocess.run(command, cwd=self.root, env=env, check=False)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w", encoding="utf-8") as out:
            return subprocess.run(
                command, cwd=self.root, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
            )

    def nbgrader_or_fail(self, *args) -> None:
        if self.nbgrader(*args).returncode != 0:
            raise CourseError(f"nbgrader {args[0]} failed (see its messages above)")


# --- setting up ------------------------------------------------------------------------------


def parse_steps(text: str) -> list:
    """'1-7' or '1,6,9-12' as a sorted list of steps."""
    steps = set()
    try:
        for part in text.split(","):
            first, _, last = part.partition("-")
            steps.update(range(int(first), int(last or first) + 1))
    except ValueError:
        raise CourseError(f"steps look like 1-12 or 1,6,9-12, not {text!r}") from None
    if not steps or not steps <= set(ALL_STEPS):
        raise CourseError(f"steps must be within {ALL_STEPS[0]}-{ALL_STEPS[-1]}, not {text!r}")
    return sorted(steps)


def step_notebooks(notebooks_dir: Path = NOTEBOOKS_DIR, steps=ALL_STEPS) -> list:
    """The notebooks of `steps`, each checked to hold its one graded check cell."""
    import nbformat

    found = []
    for path in sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb")):
        step = int(path.name[:2])
        if step not in steps:
            continue  # 00_welcome and 13_run_distributed grade nothing
        notebook = nbformat.read(path, as_version=4)
        graded = [
            cell
            for cell in notebook.cells
            if cell.metadata.get("nbgrader", {}).get("grade_id") == f"check_step_{step:02d}"
        ]
        if len(graded) != 1:
            raise CourseError(
                f"{path} has {len(graded)} check cells, not 1 "
                "(rebuild it: python -m workbook.notebooks build)"
            )
        found.append(path)
    if len(found) != len(steps):
        raise CourseError(f"{notebooks_dir} has {len(found)} of the {len(steps)} step notebooks")
    return found


def config_text(course: Course, exchange: Path) -> str:
    return CONFIG_TEMPLATE.format(
        root=str(course.root),
        course_id=course.course_id,
        exchange=str(exchange),
        assignment=course.assignment,
        script=LEARNER_SCRIPT,
        timeout=CELL_TIMEOUT,
        pattern="\n".join(
            f"        {raw_string(regexp)},  # {why}" for regexp, why in IGNORED_STDERR_LINES
        ),
        zip_regexp=raw_string(ZIP_REGEXP),
    )


def init(
    root,
    course_id: str = COURSE_ID,
    exchange=None,
    force: bool = False,
    steps=ALL_STEPS,
    notebooks_dir: Path = NOTEBOOKS_DIR,
) -> Course:
    """Creates the course: source/<assignment>/ (the step notebooks, the starter), its config."""
    course = Course(Path(root).resolve(), course_id)
    source = course.folder("source")
    if (course.root / CONFIG_FILE).exists() and not force:
        raise CourseError(
            f"{course.root} is a course already (--force rewrites source/ and config)"
        )
    notebooks = step_notebooks(notebooks_dir, steps)
    if source.exists():
        shutil.rmtree(source)
    source.mkdir(parents=True)
    for notebook in notebooks:
        shutil.copyfile(notebook, source / notebook.name)
    shutil.copyfile(STARTER_SCRIPT, source / LEARNER_SCRIPT)
    exchange = Path(exchange).resolve() if exchange else course.root / "exchange"
    (course.root / CONFIG_FILE).write_text(config_text(course, exchange), encoding="utf-8")
    return course


def generate(course: Course, force: bool = False) -> None:
    course.nbgrader_or_fail(
        "generate_assignment", course.assignment, *(["--force"] if force else [])
    )


def add_students(course: Course, students: list) -> None:
    """Adds students to the gradebook: ids, or CSV files (id, first_name, last_name, email)."""
    for entry in students:
        if entry.endswith(".csv"):
            course.nbgrader_or_fail("db", "student", "import", Path(entry).resolve())
        else:
            course.nbgrader_or_fail("db", "student", "add", entry)


def release(course: Course, force: bool = False) -> None:
    course.nbgrader_or_fail(
        "release_assignment", course.assignment, *(["--force"] if force else [])
    )


def collect(course: Course) -> None:
    """Copies each student's newest submission from the exchange into submitted/."""
    course.nbgrader_or_fail("collect", course.assignment, "--update")


def zip_collect(course: Course, archive, force: bool = False) -> None:
    """Files an LMS download (see ZIP_REGEXP for its layout) into submitted/."""
    archive = Path(archive).resolve()
    if not archive.is_file():
        raise CourseError(f"no such file: {archive}")
    archive_dir = course.root / "downloaded" / course.assignment / "archive"
    archive_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(archive, archive_dir / archive.name)
    course.nbgrader_or_fail("zip_collect", course.assignment, *(["--force"] if force else []))


# --- grading ---------------------------------------------------------------------------------


@dataclass
class AutogradeOutcome:
    student: str
    status: str  # "graded", "skipped" (graded before, nothing newer) or "failed"
    score: float | None = None
    max_score: float | None = None
    reason: str = ""
    log: str = ""

    def __str__(self) -> str:
        if self.status == "failed":
            return f"{self.student}: NOT GRADED, {self.reason} (log: {self.log})"
        score = f"{self.score:g}/{self.max_score:g}" if self.score is not None else "?"
        extra = " (graded before; --force regrades)" if self.status == "skipped" else ""
        return f"{self.student}: {score}{extra}"


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


def invalid_notebooks(folder: Path) -> list:
    """The notebooks of a submission that nbformat cannot read, as 'name: why' lines."""
    import nbformat

    problems = []
    for path in sorted(folder.glob("*.ipynb")):
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except Exception as error:  # noqa: BLE001 (any failure makes the notebook unusable)
            why = (str(error).strip().splitlines() or [""])[0].split(": ")[0]  # no quoted JSON
            problems.append(f"{path.name} ({type(error).__name__}: {why[:100]})")
    return problems


def autograde_student(course: Course, student: str, force: bool = False) -> AutogradeOutcome:
    """Autogrades one student in its own nbgrader run; a failure leaves no partial grades."""
    from nbgrader.api import Gradebook, MissingEntry

    log = course.root / "logs" / "autograde" / f"{student}.log"
    args = ["autograde", course.assignment, "--student", student] + (["--force"] if force else [])
    finished = course.nbgrader(*args, log=log)
    output = log.read_text(encoding="utf-8", errors="replace")
    graded_dir = course.folder("autograded", student)
    relative_log = str(log.relative_to(course.root))
    with Gradebook(course.db_url, course.course_id) as gradebook:
        if finished.returncode == 0 and graded_dir.is_dir():
            submission = gradebook.find_submission(course.assignment, student)
            status = "skipped" if "Skipping existing assignment" in output else "graded"
            return AutogradeOutcome(
                student, status, submission.score, submission.max_score, log=relative_log
            )
        # nbgrader removed autograded/<student>; the notebooks it graded before failing left
        # grades in the gradebook. Remove them, so that no export shows a partial score.
        try:
            gradebook.remove_submission(course.assignment, student)
        except MissingEntry:
            pass
    # What nbgrader left of this run, and feedback on an earlier submission.
    for stale in (graded_dir, course.folder("feedback", student)):
        if stale.is_dir():
            shutil.rmtree(stale)
    problems = invalid_notebooks(course.folder("submitted", student))
    reason = "invalid notebook " + "; ".join(problems) if problems else failure_reason(output)
    return AutogradeOutcome(student, "failed", reason=reason, log=relative_log)


def autograde(
    course: Course, students: list | None = None, force: bool = False, echo=print
) -> list:
    """Autogrades each student (all of submitted/ by default); one failure stops nobody else.

    nbgrader runs over the whole class at once (one process, one kernel: seconds per student).
    A student it fails on, or stops at, is set aside and the run goes on with the others; the
    students set aside are then graded alone, which gives each failure its own log and reason
    and removes partial grades.
    """
    students = students or course.submitted_students()
    if not students:
        raise CourseError(f"nothing to grade in {course.root / 'submitted'} (collect first)")
    graded, pending, attempt = {}, list(students), 0
    while len(pending) > 1:
        attempt += 1
        done, culprits = autograde_together(course, pending, force, attempt)
        graded.update(done)
        left = [student for student in pending if student not in done and student not in culprits]
        if left == pending:
            break  # no progress and nobody to blame: grade them one by one
        pending = left
    outcomes = []
    for student in students:
        outcome = graded.get(student) or autograde_student(course, student, force)
        echo(str(outcome))
        outcomes.append(outcome)
    save_status(course, outcomes)
    return outcomes


def autograde_together(course: Course, students: list, force: bool, attempt: int = 1) -> tuple:
    """One nbgrader run over `students`: ({student: outcome} of those it graded, {the students
    it failed on or stopped at})."""
    from nbgrader.api import Gradebook, MissingEntry

    log = course.root / "logs" / "autograde" / f"class-{attempt}.log"
    others = sorted(set(course.submitted_students()) - set(students))
    args = ["autograde", course.assignment, *(["--force"] if force else [])]
    if others:
        args.append("--CourseDirectory.student_id_exclude=" + ",".join(others))
    finished = course.nbgrader(*args, log=log)
    output = log.read_text(encoding="utf-8", errors="replace")
    culprits = set(re.findall(r"error processing assignment '[^']*' for student '([^']*)'", output))
    if finished.returncode != 0 and not culprits:
        # nbgrader stopped (e.g. at old metadata) without naming anyone: the one it was on.
        seen = re.findall(r"/submitted/([^/\s]+)/", output)
        culprits = {seen[-1]} if seen else set()
    relative_log = str(log.relative_to(course.root))
    outcomes = {}
    with Gradebook(course.db_url, course.course_id) as gradebook:
        for student in students:
            if student in culprits or not course.folder("autograded", student).is_dir():
                continue
            try:
                submission = gradebook.find_submission(course.assignment, student)
            except MissingEntry:
                continue
            skipped = f"Skipping existing assignment: {course.folder('autograded', student)}"
            status = "skipped" if skipped in output else "graded"
            outcomes[student] = AutogradeOutcome(
                student, status, submission.score, submission.max_score, log=relative_log
            )
    return outcomes, culprits


def save_status(course: Course, outcomes: list) -> None:
    path = course.root / STATUS_FILE
    status = load_status(course)
    for outcome in outcomes:
        status[outcome.student] = {
            "status": outcome.status,
            "reason": outcome.reason,
            "log": outcome.log,
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(status, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def load_status(course: Course) -> dict:
    """{student: {"status", "reason", "log"}} of the last autograde of each student."""
    try:
        return json.loads((course.root / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def feedback(course: Course, force: bool = False, release_to_students: bool = False) -> None:
    course.nbgrader_or_fail("generate_feedback", course.assignment, *(["--force"] if force else []))
    if release_to_students:
        course.nbgrader_or_fail("release_feedback", course.assignment)


def export(course: Course, csv_path) -> Path:
    """nbgrader's CSV of the grades: one row per student, score out of max_score (12)."""
    csv_path = Path(csv_path).resolve()
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    course.nbgrader_or_fail("export", "--to", csv_path)
    return csv_path


# --- the command line ------------------------------------------------------------------------


def add_parser(commands) -> None:
    """Adds `course SUBCOMMAND DIR ...` to the `python -m grader` parser."""
    course = commands.add_parser(
        "course",
        help="grade a class with nbgrader",
        description="Run the workbook as an nbgrader course (see grader/README.md).",
    )
    sub = course.add_subparsers(dest="course_command", required=True, metavar="SUBCOMMAND")

    def command(name, help_text, force_help=None):
        parser = sub.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("dir", metavar="DIR", help="the course folder")
        if force_help:
            parser.add_argument("--force", action="store_true", help=force_help)
        return parser

    init_parser = command(
        "init",
        "create the course folder from the step notebooks",
        "rewrite source/ and nbgrader_config.py of an existing course",
    )
    init_parser.add_argument("--course-id", default=COURSE_ID, help=f"default: {COURSE_ID}")
    init_parser.add_argument(
        "--exchange", metavar="PATH", help="nbgrader's exchange folder (default: DIR/exchange)"
    )
    init_parser.add_argument(
        "--steps", default="1-12", help="the steps to grade, e.g. 1-7 or 1,6,9-12 (default: 1-12)"
    )
    command(
        "generate",
        "nbgrader generate_assignment: the student version in release/",
        "regenerate over an existing release",
    )
    students = command("add-students", "add students to the gradebook")
    students.add_argument(
        "students",
        nargs="+",
        metavar="ID_OR_CSV",
        help="student ids, or CSV files with columns id,first_name,last_name,email",
    )
    command("release", "nbgrader release_assignment: put it in the exchange", "release again")
    command("collect", "nbgrader collect: submissions from the exchange into submitted/")
    zip_parser = command(
        "zip-collect",
        "nbgrader zip_collect: an LMS download into submitted/",
        "replace earlier extracted files and submissions of the same students",
    )
    zip_parser.add_argument("zip", metavar="ZIP", help="one folder per student id inside")
    grade = command(
        "autograde",
        "nbgrader autograde, one student at a time",
        "grade again students graded before",
    )
    grade.add_argument(
        "--student", action="append", metavar="ID", help="only this student (repeatable)"
    )
    fb = command(
        "feedback",
        "nbgrader generate_feedback: HTML feedback in feedback/",
        "regenerate existing feedback",
    )
    fb.add_argument("--release", action="store_true", help="also release_feedback to the exchange")
    export_parser = command("export", "nbgrader export: the grades as CSV")
    export_parser.add_argument("csv", metavar="CSV", help="where to write it")
    report = command("report", "per student and step: CSV, heatmap PNG and a summary")
    report.add_argument("--out", metavar="FOLDER", help="default: DIR/reports")


def run(args) -> int:
    """Runs a parsed `course` command; 0 done, 1 some student not graded, 2 could not run."""
    try:
        if args.course_command == "init":
            steps = parse_steps(args.steps)
            course = init(args.dir, args.course_id, args.exchange, args.force, steps)
            print(f"course {course.course_id} in {course.root}: {course.folder('source')}")
            return 0
        course = Course.open(args.dir)
        name = args.course_command
        if name == "generate":
            generate(course, args.force)
        elif name == "add-students":
            add_students(course, args.students)
        elif name == "release":
            release(course, args.force)
        elif name == "collect":
            collect(course)
        elif name == "zip-collect":
            zip_collect(course, args.zip, args.force)
        elif name == "autograde":
            outcomes = autograde(course, args.student, args.force)
            failed = [o for o in outcomes if o.status == "failed"]
            print(f"graded {len(outcomes) - len(failed)} of {len(outcomes)} submissions")
            return 1 if failed else 0
        elif name == "feedback":
            feedback(course, args.force, args.release)
        elif name == "export":
            print(f"grades: {export(course, args.csv)}")
        elif name == "report":
            from grader.class_report import write_report

            out = Path(args.out) if args.out else course.root / "reports"
            report = write_report(course, out)
            print(report.summary())
            print(f"\n{report.csv_path}\n{report.png_path}")
        return 0
    except CourseError as problem:
        print(f"grader course: error: {problem}", file=sys.stderr)
        return 2
