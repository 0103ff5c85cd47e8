"""The workbook as an nbgrader course: its folder, and nbgrader's Python API run on it.

The course is one assignment, the step notebooks of the manifest (workbook.facts.NOTEBOOKS) and
the learner's fashion_mnist.py.
nbgrader_config.py in the course folder holds every setting (instructor/config.py), so the
course behaves the same when an instructor types nbgrader's own commands there.
"""

from __future__ import annotations

import csv
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from instructor import ownership
from instructor.config import CONFIG_FILE, config_text
from workbook.facts import LEARNER_SCRIPT_NAME, STEPS, step_notebook
from workbook.paths import NOTEBOOKS_DIR, STARTER_SCRIPT

COURSE_ID = "horovod_workbook"
ASSIGNMENT = "horovod_steps"  # students fetch it into ./horovod_steps


class CourseError(Exception):
    """A course command that cannot go on (missing course, bad arguments); one line for the user."""


@dataclass
class Course:
    """An nbgrader course folder made by `init`."""

    root: Path
    course_id: str = COURSE_ID
    assignment: str = ASSIGNMENT
    config: object = field(default=None, repr=False)  # nbgrader_config.py, as traitlets read it

    @classmethod
    def open(cls, root) -> "Course":
        """The course in `root`, with the settings of its nbgrader_config.py."""
        from traitlets.config.loader import PyFileConfigLoader

        root = Path(root).resolve()
        if not (root / CONFIG_FILE).is_file():
            raise CourseError(f"{root} is not a course: no {CONFIG_FILE} (run `init` first)")
        config = PyFileConfigLoader(CONFIG_FILE, path=str(root)).load_config()
        return cls(root, config.CourseDirectory.get("course_id", COURSE_ID), config=config)

    def folder(self, kind: str, student: str | None = None) -> Path:
        """nbgrader's folder of the assignment: source, release, submitted, autograded..."""
        if student is None:
            return self.root / kind / self.assignment
        return self.root / kind / student / self.assignment

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.root / 'gradebook.db'}"

    def gradebook(self):
        from nbgrader.api import Gradebook

        return Gradebook(self.db_url, self.course_id)

    def submitted_students(self) -> list:
        submitted = self.root / "submitted"
        if not submitted.is_dir():
            return []
        return sorted(
            p.name
            for p in submitted.iterdir()
            if not p.is_symlink() and (p / self.assignment).is_dir()
        )

    @property
    def exchange_root(self) -> Path:
        from nbgrader.exchange.default import Exchange

        return Path(self.config.Exchange.get("root") or Exchange.class_traits()["root"].default())

    def api(self, **settings):
        """nbgrader's NbGraderAPI on this course: its nbgrader_config.py, plus `settings`
        ({"Class": {"trait": value}}), e.g. ExchangeReleaseAssignment={"force": True}."""
        from nbgrader.apps import NbGraderAPI
        from nbgrader.coursedir import CourseDirectory
        from traitlets.config import Config

        config = Config(self.config)
        config.merge(Config(settings))
        return NbGraderAPI(CourseDirectory(config=config), config=config)


def checked(result: dict, what: str) -> str:
    """The log of an NbGraderAPI call; CourseError with nbgrader's messages when it failed."""
    log = result.get("log", "")
    if not result.get("success"):
        errors, keep = [], False
        for line in log.splitlines():  # nbgrader's error lines and their continuation lines
            keep = line.startswith(("[ERROR]", "[CRITICAL]")) or (keep and not line.startswith("["))
            if keep and line.strip():
                errors.append(line.split("] ", 1)[-1] if line.startswith("[") else line)
        last = (result.get("error", "").strip().splitlines() or ["(no message)"])[-1]
        raise CourseError(f"nbgrader {what} failed: " + ("\n".join(errors) or last))
    return log


# --- setting up ------------------------------------------------------------------------------


ALL_STEPS = f"{STEPS[0]}-{STEPS[-1]}"  # every step, as parse_steps reads it


def parse_steps(text: str) -> list:
    """'1-7' or '1,6,9-12' (see ALL_STEPS) as a sorted list of steps."""
    steps = set()
    try:
        for part in text.split(","):
            first, _, last = part.partition("-")
            steps.update(range(int(first), int(last or first) + 1))
    except ValueError:
        raise CourseError(f"steps look like {ALL_STEPS} or 1,6,9-12, not {text!r}") from None
    if not steps or not steps <= set(STEPS):
        raise CourseError(f"steps must be within {STEPS[0]}-{STEPS[-1]}, not {text!r}")
    return sorted(steps)


def step_notebooks(notebooks_dir: Path = NOTEBOOKS_DIR, steps=STEPS) -> list:
    """The notebooks of `steps`, each checked to hold its one graded check cell."""
    import nbformat

    found = []
    for step in sorted(steps):
        path = Path(notebooks_dir) / step_notebook(step).file_name
        if not path.is_file():
            continue
        notebook = nbformat.read(path, as_version=4)
        graded = [
            cell
            for cell in notebook.cells
            if cell.metadata.get("nbgrader", {}).get("grade_id") == f"check_step_{step:02d}"
        ]
        if len(graded) != 1:
            raise CourseError(
                f"{path} has {len(graded)} check cells, not 1 "
                "(rebuild it: python -m authoring build)"
            )
        found.append(path)
    if len(found) != len(steps):
        raise CourseError(f"{notebooks_dir} has {len(found)} of the {len(steps)} step notebooks")
    return found


def init(
    root,
    course_id: str = COURSE_ID,
    exchange=None,
    force: bool = False,
    steps=STEPS,
    notebooks_dir: Path = NOTEBOOKS_DIR,
) -> Course:
    """Creates the course: source/<assignment>/ (the step notebooks, the starter), its config."""
    root = Path(root).resolve()
    if (root / CONFIG_FILE).exists() and not force:
        raise CourseError(f"{root} is a course already (--force rewrites source/ and config)")
    notebooks = step_notebooks(notebooks_dir, steps)
    source = root / "source" / ASSIGNMENT
    if source.exists():
        shutil.rmtree(source)
    source.mkdir(parents=True)
    for notebook in notebooks:
        shutil.copyfile(notebook, source / notebook.name)
    shutil.copyfile(STARTER_SCRIPT, source / LEARNER_SCRIPT_NAME)
    exchange = Path(exchange).resolve() if exchange else root / "exchange"
    text = config_text(root, course_id, exchange, ASSIGNMENT)
    (root / CONFIG_FILE).write_text(text, encoding="utf-8")
    return Course.open(root)


def generate(course: Course, force: bool = False) -> bool:
    """The student version in release/ (nbgrader generate_assignment); False when release/
    exists already and `force` is not set (nbgrader then leaves it as it is)."""
    log = checked(
        course.api().generate_assignment(course.assignment, force=force), "generate_assignment"
    )
    return "Skipping existing assignment" not in log


def add_students(course: Course, entries: list) -> list:
    """Adds students to the gradebook: ids, or CSV files (id, first_name, last_name, email)."""
    students = []
    for entry in entries:
        if not entry.endswith(".csv"):
            students.append({"id": entry})
            continue
        try:
            with open(entry, newline="", encoding="utf-8") as table:
                rows = list(csv.DictReader(table))
        except OSError as error:
            raise CourseError(f"cannot read {entry}: {error.strerror}") from None
        if rows and "id" not in rows[0]:
            raise CourseError(f"{entry} has no id column (columns: id,first_name,last_name,email)")
        students += rows
    with course.gradebook() as gradebook:
        for row in students:
            details = {k: row.get(k) or None for k in ("first_name", "last_name", "email")}
            gradebook.update_or_create_student(row["id"].strip(), **details)
    return [row["id"].strip() for row in students]


def release(course: Course, force: bool = False) -> None:
    """Puts release/ in the exchange, where students fetch it (`force`: over an earlier one)."""
    api = course.api(ExchangeReleaseAssignment={"force": force})
    checked(api.release_assignment(course.assignment), "release_assignment")
    # nbgrader's inbound is write-only for students (0733, setgid: submissions in the
    # instructor's group); sticky too, so that nobody renames or deletes another's submission.
    inbound = course.exchange_root / course.course_id / "inbound"
    inbound.chmod(inbound.stat().st_mode | stat.S_ISVTX)


# The exchange's plug-ins (instructor/exchange.py), whatever an older nbgrader_config.py names.
EXCHANGE = {
    "ExchangeFactory": {
        "collect": "instructor.exchange.CollectOwnSubmissions",
        "release_feedback": "instructor.exchange.ReleaseFeedbackPerStudent",
    }
}


def collect(course: Course) -> list | None:
    """Copies each student's newest own submission from the exchange into submitted/; what it
    set aside instead ([ownership.NotCollected]: in another's name, unreadable, uncopyable).
    None when the exchange has no inbound folder (nothing was released or submitted there)."""
    if not (course.exchange_root / course.course_id / "inbound").is_dir():
        return None
    checked(course.api(**EXCHANGE).collect(course.assignment, update=True), "collect")
    return ownership.not_collected(course.root)


def zip_collect(course: Course, archive, force: bool = False) -> tuple:
    """Files an LMS download (see config.ZIP_REGEXP for its layout) into submitted/:
    (the students it added, nbgrader's warnings about files it skipped or could not name)."""
    import logging

    from nbgrader.apps import ZipCollectApp
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import capture_log

    archive = Path(archive).resolve()
    if not archive.is_file():
        raise CourseError(f"no such file: {archive}")
    archive_dir = course.root / "downloaded" / course.assignment / "archive"
    archive_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(archive, archive_dir / archive.name)
    before = set(course.submitted_students())
    # No NbGraderAPI method for zip_collect: nbgrader's app, configured as its command line
    # would be, logging to the captured log only (a line per file otherwise).
    log = logging.getLogger("instructor.zip_collect")
    log.propagate = False
    app = ZipCollectApp(config=course.config, log=log)
    app.coursedir = CourseDirectory(config=course.config, assignment_id=course.assignment)
    app.force = force
    output = checked(capture_log(app), "zip_collect")
    warnings = [
        line.removeprefix("[WARNING] ")
        for line in output.splitlines()
        if line.startswith("[WARNING]") and "Directory not found. Creating" not in line
    ]
    return sorted(set(course.submitted_students()) - before), warnings


def feedback(course: Course, release_to_students: bool = False) -> tuple:
    """HTML feedback in feedback/ for every autograded student, optionally released into the
    exchange: (the students with feedback, "STUDENT: why" for each left out). One student's
    failure leaves the others' feedback generated and released."""
    students = [s for s in course.submitted_students() if course.folder("autograded", s).is_dir()]
    if not students:
        return [], []  # nbgrader would fail: "No notebooks were matched"
    api = course.api(**EXCHANGE)
    problems = []
    result = api.generate_feedback(course.assignment)
    if not result.get("success"):
        failed = re.findall(
            r"error processing assignment '[^']*' for student '([^']*)'", result.get("log", "")
        )
        if not failed:
            checked(result, "generate_feedback")
        problems += [
            f"{student}: nbgrader could not make its feedback (its log above)" for student in failed
        ]
        students = [s for s in students if s not in failed]
    if release_to_students:
        result = api.release_feedback(course.assignment)
        if not result.get("success"):
            marker = "FEEDBACK NOT RELEASED: "
            left = [
                line.split(marker, 1)[1]
                for line in result.get("log", "").splitlines()
                if marker in line
            ]
            if not left:
                checked(result, "release_feedback")
            problems += left
    return students, problems


def export(course: Course, csv_path) -> Path:
    """nbgrader's CSV of the grades: one row per student, score out of max_score."""
    from nbgrader.plugins import CsvExportPlugin

    csv_path = Path(csv_path).resolve()
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with course.gradebook() as gradebook:
        CsvExportPlugin(to=str(csv_path)).export(gradebook)
    return csv_path
