"""The instructor's tools as the workshop hub uses them (issue 29): they work from the
environment's interpreter alone (nbgrader starts `alembic` by name)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from workbook.paths import REPO


@pytest.mark.timeout(300)
def test_instructor_commands_work_from_the_environments_interpreter_alone(tmp_path):
    """nbgrader starts `alembic` (the gradebook) by name: without the environment on PATH it
    was FileNotFoundError; the instructor package puts its interpreter's folder first."""
    course = tmp_path / "course"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for args in (
        ["init", str(course), "--steps", "1"],
        ["generate", str(course)],
        ["add-students", str(course), "alice"],
    ):
        reply = subprocess.run(
            [sys.executable, "-m", "instructor", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert reply.returncode == 0, (args, reply.stdout[-2000:], reply.stderr[-2000:])
    assert (course / "gradebook.db").is_file()
