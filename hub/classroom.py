"""nbgrader the hub way (nbgrader 0.9's documented JupyterHub set-up, one course):

- the exchange, a folder every account can write to (inbound is write-only for students; each
  submission is private to its author and the instructor, and collect takes only those made by
  the student they name: instructor/exchange.py);
- Jupyter settings per role, on each server's JUPYTER_CONFIG_PATH: the course id and the
  exchange for everyone; for attendees, the Assignments list without the formgrader, the course
  list and the create-assignment toolbar; for the instructor, the formgrader on the course;
- the course itself, owned by the instructor's account, made and released with
  `python -m instructor` (init with the hub's exchange, generate, add-students, release).
"""

from __future__ import annotations

import json
import pwd
import re
import shutil
import subprocess
from pathlib import Path

from hub.settings import HubSettings

ROLES = ("student", "instructor")
COURSE_ID = "horovod_workbook"  # instructor.course.COURSE_ID, the course `init` makes
ASSIGNMENT = "horovod_steps"
STUDENT_HIDDEN = {  # JupyterLab plugins of nbgrader an attendee does not need
    "@jupyter/nbgrader:formgrader": True,
    "@jupyter/nbgrader:create-assignment": True,
    "@jupyter/nbgrader:course-list": True,
}
# An attendee's submit, list and fetch (instructor/exchange.py): the workbook's notebooks/ is the
# assignment (one copy of each notebook and of fashion_mnist.py, nothing to fetch), and a
# submission is private to its author and the instructor.
STUDENT_EXCHANGE = [
    'c.ExchangeFactory.submit = "instructor.exchange.WorkbookSubmit"',
    'c.ExchangeFactory.list = "instructor.exchange.WorkbookList"',
    'c.ExchangeFactory.fetch_assignment = "instructor.exchange.WorkbookFetch"',
    'c.WorkbookFolder.folder = "notebooks"',
]
STUDENT_SERVER = {
    "ServerApp": {
        "jpserver_extensions": {
            "nbgrader.server_extensions.formgrader": False,
            "nbgrader.server_extensions.course_list": False,
        }
    }
}


def config_dir(settings: HubSettings, role: str) -> Path:
    """Beside the state folder (which is root-only): every server reads its role's folder."""
    return settings.jupyter_dir / role


def course_dir(settings: HubSettings) -> Path:
    return Path(settings.course or Path(pwd.getpwnam(settings.instructor).pw_dir) / "course")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o644)


def write_role_configs(settings: HubSettings) -> None:
    for role in ROLES:
        folder = config_dir(settings, role)
        lines = [
            "# Written by `make hub` (hub/classroom.py): nbgrader on the workshop hub.",
            "c = get_config()  # noqa: F821",
            f"c.CourseDirectory.course_id = {COURSE_ID!r}",
            f"c.Exchange.root = {settings.exchange!r}",
        ]
        if role == "instructor":
            lines.append(f"c.CourseDirectory.root = {str(course_dir(settings))!r}")
        else:
            lines += STUDENT_EXCHANGE
        write(folder / "nbgrader_config.py", "\n".join(lines) + "\n")
        if role == "student":
            write(folder / "jupyter_server_config.json", json.dumps(STUDENT_SERVER, indent=2))
            write(
                folder / "labconfig" / "page_config.json",
                json.dumps({"disabledExtensions": STUDENT_HIDDEN}, indent=2),
            )
    # The servers run as the attendees: they read these folders (nothing private is in them).
    for folder in (
        settings.jupyter_dir,
        *(config_dir(settings, role) for role in ROLES),
        config_dir(settings, "student") / "labconfig",
    ):
        folder.chmod(0o755)


def make_exchange(settings: HubSettings) -> Path:
    exchange = Path(settings.exchange)
    exchange.mkdir(parents=True, exist_ok=True)
    # As nbgrader's set-up asks, everyone writes (each into their own), plus the sticky bit: no
    # attendee can rename or delete the course's folder and put one of their own in its place.
    exchange.chmod(0o1777)
    return exchange


def as_instructor(settings: HubSettings, *args: str) -> subprocess.CompletedProcess:
    """`python -m instructor ARGS` run by the instructor's account, in the repository."""
    entry = pwd.getpwnam(settings.instructor)
    venv_bin = Path(settings.venv) / "bin"
    command = [
        "runuser",
        "-u",
        settings.instructor,
        "--",
        "env",
        f"HOME={entry.pw_dir}",
        f"USER={settings.instructor}",
        f"PATH={venv_bin}:/usr/local/bin:/usr/bin:/bin",
        str(venv_bin / "python"),
        "-m",
        "instructor",
        *args,
    ]
    return subprocess.run(command, cwd=settings.repo, capture_output=True, text=True, timeout=600)


def checked(reply: subprocess.CompletedProcess, what: str) -> str:
    if reply.returncode != 0:
        raise RuntimeError(
            f"{what} failed (exit {reply.returncode}):\n{(reply.stdout + reply.stderr)[-2000:]}"
        )
    return reply.stdout.strip()


def course_exchange(course: Path) -> str | None:
    """The exchange the course's nbgrader_config.py names (None: no course there yet)."""
    try:
        text = (course / "nbgrader_config.py").read_text()
    except OSError:
        return None
    found = re.search(r"^c\.Exchange\.root = (['\"])(.*)\1$", text, re.M)
    return found.group(2) if found else None


def prepare_course(settings: HubSettings) -> list[str]:
    """The course, made and released once; the roster added every time. What was done."""
    course = course_dir(settings)
    done = []
    if course_exchange(course) != settings.exchange:  # no course yet, or another exchange
        force = ["--force"] if (course / "nbgrader_config.py").is_file() else []
        done.append(
            checked(
                as_instructor(
                    settings, "init", str(course), "--exchange", settings.exchange, *force
                ),
                "python -m instructor init",
            )
        )
    done.append(
        checked(as_instructor(settings, "generate", str(course)), "python -m instructor generate")
    )
    roster = course.parent / "roster.csv"  # in the instructor's private home, for their account
    shutil.copyfile(settings.roster, roster)
    shutil.chown(roster, user=settings.instructor)  # names and e-mails: not for the attendees
    roster.chmod(0o600)
    done.append(
        checked(
            as_instructor(settings, "add-students", str(course), str(roster)),
            "python -m instructor add-students",
        )
    )
    if not (Path(settings.exchange) / COURSE_ID / "outbound" / ASSIGNMENT).is_dir():
        done.append(
            checked(as_instructor(settings, "release", str(course)), "python -m instructor release")
        )
    return done


def setup(settings: HubSettings) -> list[str]:
    make_exchange(settings)
    write_role_configs(settings)
    return prepare_course(settings)


def role_of(settings: HubSettings, user: str) -> str:
    return "instructor" if user == settings.instructor else "student"
