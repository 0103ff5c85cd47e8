"""nbgrader's exchange as the workbook's course uses it (nbgrader 0.9.6's default exchange: a
folder shared by every account; ngshare would authenticate, but its exchange plug-in's last
release, 2022, predates nbgrader 0.9, so the checks are here instead: instructor/README.md).

The instructor's side, plugged in by the course's nbgrader_config.py (instructor/config.py), so
the formgrader's buttons do the same as `python -m instructor`:

- `CollectOwnSubmissions`: a submission is collected only when the student it names made it
  (instructor/ownership.py); one in another's name, one whose name or files cannot be read,
  one that cannot be copied is set aside (left in the exchange, never graded), named in the
  log and in the course's record, and the others are collected all the same. Links in a
  submission are copied as links, never followed (intake.py sets aside those leading out).
- `ReleaseFeedbackPerStudent`: one student's feedback that cannot be released (its submission
  had no submission_secret.txt: forged, or not submitted through the exchange) is named, and
  everyone else's is released.

The attendees' side on the workshop hub, plugged in by hub/classroom.py's student settings:

- `WorkbookSubmit`: the submission is private (folders 0770, files 0660, the group the
  instructor's inbound gives: no other attendee reads or changes it, even knowing its name),
  and, with `WorkbookFolder.folder` set, its files come from the attendee's workbook (the
  notebooks they edited and checked), not from a second, fetched copy; it says what it sends.
- `WorkbookList`, `WorkbookFetch`: the Assignments list shows that workbook folder as the
  fetched assignment, so there is nothing to fetch and one copy of each notebook.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from nbgrader.exchange.default import (
    ExchangeCollect,
    ExchangeFetchAssignment,
    ExchangeList,
    ExchangeReleaseFeedback,
    ExchangeSubmit,
)
from nbgrader.utils import ignore_patterns
from traitlets import Unicode
from traitlets.config import Configurable

from instructor import ownership

SCRIPT = "fashion_mnist.py"  # workbook.facts.LEARNER_SCRIPT_NAME (the attendee's server
# imports the attendee's own copy of workbook/: this module does not depend on it)
RECEIPT = "last_submission.txt"  # in the attendee's workbook folder: what submit sent


# --- the instructor's side ---------------------------------------------------------------------


class CollectOwnSubmissions(ExchangeCollect):
    """nbgrader's collect, taking only each student's own submissions (see the module)."""

    def init_src(self):
        """nbgrader's, except that each submission is checked before the newest is chosen: a
        forged newer one never hides the student's own."""
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not os.access(self.inbound_path, os.R_OK | os.X_OK):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        student_id = self.coursedir.student_id or "*"
        pattern = os.path.join(self.inbound_path, f"{student_id}+{self.coursedir.assignment_id}+*")
        self.set_aside = []
        records = []
        for path in sorted(glob.glob(pattern)):
            name = os.path.basename(path)
            claims = name.split("+", 1)[0]
            try:
                record = self._path_to_record(path)
            except Exception:  # noqa: BLE001 (nbgrader fails the whole collect on a bad name)
                self._aside(name, claims, "its name is not STUDENT+ASSIGNMENT+TIMESTAMP")
                continue
            why = (
                ownership.not_their_own(Path(path), record["username"]) if self.check_owner else ""
            )
            if why:
                self._aside(name, record["username"], why)
                continue
            records.append(record)
        self.check_owner = False  # checked above; nbgrader's own check would only warn
        self.duedate = self._duedate()
        by_student = {}
        for record in records:
            by_student.setdefault(record["username"], []).append(record)
        self.src_records = []
        for mine in by_student.values():
            mine = self._sort_by_timestamp(mine)
            if self.duedate is not None and self.before_duedate:
                mine = [r for r in mine if r["timestamp"] <= self.duedate] or mine
            self.src_records.append(mine[0])

    def _duedate(self):
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gradebook:
            try:
                return gradebook.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                return None

    def _aside(self, submission: str, student: str, why: str) -> None:
        item = ownership.NotCollected(submission, student, why)
        self.set_aside.append(item)
        self.log.error("NOT COLLECTED: %s", item)

    def do_copy(self, src, dest, log=None):
        """Links copied as links; a submission that cannot be copied is set aside, the others
        go on."""
        try:
            if self.get_size(src) > 1000 * self.coursedir.max_dir_size:
                raise RuntimeError(f"over {self.coursedir.max_dir_size} kB")
            shutil.copytree(
                src,
                dest,
                symlinks=True,
                ignore=ignore_patterns(
                    exclude=self.coursedir.ignore,
                    include=self.coursedir.include,
                    max_file_size=self.coursedir.max_file_size,
                    log=self.log,
                ),
            )
        except Exception as error:  # noqa: BLE001 (one submission never stops the class)
            shutil.rmtree(dest, ignore_errors=True)
            name = os.path.basename(src)
            self._aside(name, name.split("+", 1)[0], f"could not be copied: {error}")

    def copy_files(self):
        try:
            super().copy_files()
        finally:
            everyone = self.coursedir.student_id in ("", "*")
            ownership.record(self.coursedir.root, self.set_aside, replace=everyone)
            if self.set_aside:
                self.log.error(
                    "%d submissions set aside (not collected, never graded as the "
                    "student they name): listed above and in %s",
                    len(self.set_aside),
                    ownership.NOT_COLLECTED,
                )


# nbgrader_config.py files written before the owner check name the collect by its old name.
CollectWithoutFollowingLinks = CollectOwnSubmissions


class ReleaseFeedbackPerStudent(ExchangeReleaseFeedback):
    """nbgrader's release_feedback, one student at a time: a student whose feedback cannot be
    released is named and the others are released; then it fails, naming them."""

    def copy_files(self):
        whole = self.src_path  # feedback/STUDENT/ASSIGNMENT, STUDENT a glob
        problems = []
        for folder in sorted(glob.glob(whole)):
            student = Path(folder).parent.name
            missing = [
                n
                for n in ("timestamp.txt", "submission_secret.txt")
                if not os.path.isfile(os.path.join(folder, n))
            ]
            if missing:
                problems.append(
                    f"{student}: no {' or '.join(missing)} in their feedback folder "
                    "(a submission not made through the exchange, or forged): not "
                    f"released; it stays in {folder}"
                )
                continue
            self.src_path = folder
            try:
                super().copy_files()
            except Exception as error:  # noqa: BLE001 (one student never stops the class)
                problems.append(f"{student}: {type(error).__name__}: {error}")
            finally:
                self.src_path = whole
        for problem in problems:
            self.log.error("FEEDBACK NOT RELEASED: %s", problem)
        if problems:
            self.fail(
                f"feedback released for everyone else; not for {len(problems)}: "
                + "; ".join(problems)
            )


# --- the attendees' side (the workshop hub) ----------------------------------------------------


class WorkbookFolder(Configurable):
    """Where the attendee works on the assignment."""

    folder = Unicode(
        "",
        help="The attendee's workbook folder (relative to Exchange.assignment_dir) that is "
        "the assignment: submit takes the assignment's files from it and the Assignments list "
        "shows it as fetched. Empty: nbgrader's way, a fetched copy named after the assignment.",
    ).tag(config=True)

    def workbook(self) -> Path | None:
        return Path(self.assignment_dir, self.folder).absolute() if self.folder else None

    def released_files(self, course_id: str, assignment_id: str) -> list:
        """The names of the files the instructor released (the step notebooks, the script)."""
        release = Path(self.root, course_id, "outbound", assignment_id)
        return sorted(p.name for p in release.iterdir() if p.is_file())


class WorkbookSubmit(WorkbookFolder, ExchangeSubmit):
    """nbgrader's submit, private, from the attendee's workbook when WorkbookFolder.folder is
    set, saying what it sends."""

    def init_src(self):
        if not self.folder:
            return super().init_src()
        self.src_path = str(self.workbook())
        if not os.path.isdir(self.src_path):
            self.fail(f"No workbook folder at {self.src_path}")

    def copy_files(self):
        self.init_release()
        secret = secrets.token_hex(64)
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        self.log.info("Source: %s", self.src_path)
        self.log.info("Destination: %s", dest)
        self.check_filename_diff()
        names = self.released_files(*self._ids()) if self.folder else None
        sent = what_is_sent(Path(self.src_path), names)
        self.log.info("Sending: %s", sent)
        copy_private(
            self.src_path,
            dest,
            names,
            self._ignore(),
            {"timestamp.txt": self.timestamp, "submission_secret.txt": secret},
        )
        cache = os.path.join(
            self.cache_path,
            self.assignment_filename.rsplit("+", 1)[0]
            if self.add_random_string
            else self.assignment_filename,
        )
        os.makedirs(self.cache_path, exist_ok=True)
        copy_private(
            self.src_path,
            cache,
            names,
            self._ignore(),
            {"timestamp.txt": self.timestamp, "submission_secret.txt": secret},
        )
        self.log.info(
            "Submitted as: %s %s %s",
            self.coursedir.course_id,
            self.coursedir.assignment_id,
            self.timestamp,
        )
        if self.folder:  # the Assignments list says nothing on success: this file does
            Path(self.src_path, RECEIPT).write_text(
                f"Submitted {self.coursedir.assignment_id} at {self.timestamp}:\n{sent}\n",
                encoding="utf-8",
            )

    def check_filename_diff(self):
        if not self.folder:
            return super().check_filename_diff()
        missing = [
            n for n in self.released_files(*self._ids()) if not Path(self.src_path, n).is_file()
        ]
        if missing:
            self.log.warning("Not in %s, so not sent: %s", self.src_path, ", ".join(missing))

    def _ids(self) -> tuple:
        return self.coursedir.course_id, self.coursedir.assignment_id

    def _ignore(self):
        return ignore_patterns(
            exclude=self.coursedir.ignore,
            include=self.coursedir.include,
            max_file_size=self.coursedir.max_file_size,
            log=self.log,
        )


def copy_private(src, dest, names, ignore, extra: dict) -> None:
    """`src` (only the entries `names` when given) into a new folder `dest`, with `extra`
    files ({name: text}) in it too: folders 0770, files 0660, in the group the parent folder
    gives (nbgrader's inbound is setgid: the instructor's group), so that nobody but the
    submitter and that group reads or changes it, from its first byte. Links stay links."""
    _copy_tree(Path(src), Path(dest), names, ignore)
    for name, text in extra.items():
        _write_private(Path(dest) / name, text.encode())
    for top, dirs, files in os.walk(dest, topdown=False):  # whatever the process's umask
        for name in files:
            if not os.path.islink(os.path.join(top, name)):
                os.chmod(os.path.join(top, name), 0o660)
        os.chmod(top, 0o770)


def _copy_tree(src: Path, dest: Path, names, ignore) -> None:
    os.mkdir(dest, 0o770)
    entries = sorted(os.listdir(src))
    skipped = set(ignore(str(src), entries)) if ignore else set()
    for name in entries:
        if name in skipped or (names is not None and name not in names):
            continue
        source, target = src / name, dest / name
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_dir():
            _copy_tree(source, target, None, ignore)
        elif source.is_file():
            _write_private(target, source.read_bytes())


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o660)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def what_is_sent(folder: Path, names: list | None = None) -> str:
    """'.../fashion_mnist.py last changed 2026-11-28 10:42:13 UTC (3 min ago); the reading sees
    3 of 12 steps done, the first not done: step 4 (why); 12 notebooks' for the submission's
    source folder (only the files `names`, when given)."""
    script = folder / SCRIPT
    notebooks = len([p for p in folder.glob("*.ipynb") if names is None or p.name in names])
    if not script.is_file():
        return f"no {SCRIPT} in {folder}; {notebooks} notebooks"
    changed = datetime.datetime.fromtimestamp(script.stat().st_mtime, datetime.timezone.utc)
    ago = datetime.datetime.now(datetime.timezone.utc) - changed
    minutes = int(ago.total_seconds() // 60)
    return (
        f"{folder / SCRIPT} last changed {changed:%Y-%m-%d %H:%M:%S} UTC "
        f"({minutes} min ago); {steps_done(script)}; {notebooks} notebooks"
    )


def steps_done(script: Path, timeout: float = 60) -> str:
    """What the step checker's reading of `script` sees done, in words (its own process: the
    checker budgets its checks with forks, which a Jupyter server must not do)."""
    try:
        reply = subprocess.run(
            [sys.executable, "-m", "grader", "check", str(script), "--all", "--json"],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=script.parent,
        )
        results = json.loads(reply.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return "the step checker could not read it"
    done = [r["step"] for r in results if r.get("passed")]
    first = next((r for r in results if not r.get("passed")), None)
    why = first and (first.get("message") or "").splitlines()[0][:120]
    return f"the reading sees {len(done)} of {len(results)} steps done" + (
        f", the first not done: step {first['step']} ({why})" if first else ""
    )


class WorkbookList(WorkbookFolder, ExchangeList):
    """nbgrader's list; with WorkbookFolder.folder set, the released assignment is shown as
    fetched, its notebooks those of the attendee's workbook (the same files their tabs show)."""

    def parse_assignments(self):
        assignments = super().parse_assignments()
        if not self.folder or self.inbound or self.cached:
            return assignments
        workbook = self.workbook()
        for info in assignments:
            if info.get("status") in ("released", "fetched"):
                info["status"], info["path"] = "fetched", str(workbook)
                info["notebooks"] = [
                    {"notebook_id": Path(name).stem, "path": str(workbook / name)}
                    for name in self.released_files(info["course_id"], info["assignment_id"])
                    if name.endswith(".ipynb") and (workbook / name).is_file()
                ]
        return assignments


class WorkbookFetch(WorkbookFolder, ExchangeFetchAssignment):
    """With WorkbookFolder.folder set there is nothing to fetch: the workbook is the
    assignment."""

    def init_dest(self):
        if not self.folder:
            return super().init_dest()
        self.fail(
            f"Nothing to fetch: your workbook ({self.workbook()}) is the assignment; "
            "work there and submit it"
        )
