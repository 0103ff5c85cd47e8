"""Where things live in the repository (one place, so nothing hard-codes its own idea)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = REPO / "notebooks"
SOLUTIONS_DIR = REPO / "solutions"
LOGS_DIR = NOTEBOOKS_DIR / "logs"

# The pristine starting script, and the learner's working copy that the notebooks edit and run.
STARTER_SCRIPT = SOLUTIONS_DIR / "fashion_mnist.py"
LEARNER_SCRIPT = NOTEBOOKS_DIR / "fashion_mnist.py"
