"""Hostile scripts against the checker's command line (`python -m grader check`, `batch`): every
step of a script that loops or nests forever ends within the budget without a traceback, and
batch does not follow a link out of a student's folder.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from hostile_scripts import BUDGET_SECONDS, DEEP, LONG_LOOP, script_after
from workbook.facts import LAST_STEP, LEARNER_SCRIPT_NAME, SOLUTION_FILE_NAME, STEPS
from workbook.paths import SOLUTIONS_DIR


@pytest.mark.parametrize("name, text", [("long loop", LONG_LOOP), ("deep nesting", DEEP)])
def test_every_step_of_a_hostile_script_ends_within_the_budget(tmp_path, name, text):
    script = tmp_path / "fashion_mnist.py"
    script.write_text(text)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "grader", "check", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - started < 3 * BUDGET_SECONDS, name
    assert done.returncode == 1, done.stdout + done.stderr  # 1: some step not done
    assert "Traceback" not in done.stderr, done.stderr


def test_batch_does_not_follow_a_link_out_of_a_students_folder(tmp_path):
    (tmp_path / "class" / "mallory").mkdir(parents=True)
    (tmp_path / "class" / "mallory" / LEARNER_SCRIPT_NAME).symlink_to(
        SOLUTIONS_DIR / SOLUTION_FILE_NAME
    )
    (tmp_path / "class" / "olivia").mkdir()
    (tmp_path / "class" / "olivia" / LEARNER_SCRIPT_NAME).write_text(script_after(LAST_STEP))
    done = subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(tmp_path / "class")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"mallory: 0/{len(STEPS)}  (fashion_mnist.py is a link to "), (
        done.stdout
    )
    assert "outside the student's folder: not followed" in lines[0]
    assert lines[1] == f"olivia: {len(STEPS)}/{len(STEPS)}", done.stdout
