"""Where things live in the repository (one place, so nothing hard-codes its own idea)."""

from pathlib import Path

from workbook.facts import LEARNER_SCRIPT_NAME

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = REPO / "notebooks"
SOLUTIONS_DIR = REPO / "solutions"
LOGS_DIR = NOTEBOOKS_DIR / "logs"

# The pristine starting script, and the learner's working copy that the notebooks edit and run.
STARTER_SCRIPT = SOLUTIONS_DIR / LEARNER_SCRIPT_NAME
LEARNER_SCRIPT = NOTEBOOKS_DIR / LEARNER_SCRIPT_NAME
