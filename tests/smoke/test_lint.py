"""The team's formatter and linter hold on the whole tree: `ruff format --check` and `ruff check`
with pyproject.toml's settings ([tool.ruff]: the rules chosen, the learners' files left out).

Fix what they report with `.venv/bin/ruff format .` and `.venv/bin/ruff check --fix .`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workbook.paths import REPO

RUFF = Path(sys.executable).with_name("ruff")


@pytest.mark.parametrize(
    "command", [["format", "--check", "."], ["check", "--output-format", "concise", "."]]
)
def test_ruff_finds_nothing_to_change(command):
    assert RUFF.exists(), f"{RUFF} is missing: make env installs it (requirements/workbook.txt)"
    done = subprocess.run(
        [str(RUFF), *command], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"ruff {' '.join(command)}:\n{done.stdout}{done.stderr}"
