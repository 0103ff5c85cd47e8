"""Hostile scripts: a finished script with a line added that makes the checker's reading huge or
endless. Shared by tests/unit/test_hostile_scripts.py, tests/smoke/test_hostile_scripts_cli.py
and tests/system/test_redteam.py.
"""

from __future__ import annotations

import re

from workbook.facts import LAST_STEP, SOLUTION_FILE_NAME, chain_file_name
from workbook.paths import SOLUTIONS_DIR

BUDGET_SECONDS = 40  # a hostile script's check ends well within this, on a busy machine


def script_after(step: int) -> str:
    name = SOLUTION_FILE_NAME if step == LAST_STEP else chain_file_name(step)
    return (SOLUTIONS_DIR / name).read_text()


def with_line(script: str, anchor: str, line: str) -> str:
    """`script` with `line` inserted after the first line that contains `anchor`."""
    lines = script.splitlines(keepends=True)
    index = next(i for i, text in enumerate(lines) if anchor in text)
    indent = re.match(r"\s*", lines[index + 1]).group(0)
    lines.insert(index + 1, indent + line + "\n")
    return "".join(lines)


HUGE_POWER = with_line(script_after(12), "def step_decay", "big = 9 ** 9 ** 9 ** 2")
LONG_LOOP = script_after(6) + "\nfor _ in range(10 ** 12):\n    pass\n"
DEEP = script_after(6) + "\nvalue = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
SQUARES = with_line(script_after(12), "def step_decay",
                    "n = 3\n    for _ in range(64):\n        n = n * n")

# Scripts that try to choose who judges them, run by the run check (grader/live/run.py):
# the finished script that leaves at once when it sees the probe's variable;
EARLY_EXIT_ON_PROBE = with_line(script_after(12), "import horovod.tensorflow.keras as hvd",
                                "if os.environ.get('WORKBOOK_PROBE_DIR'):\n    sys.exit(0)")
# ...that starves its own run with busy processes of its own beside its workers;
SELF_STARVING = with_line(script_after(12), "import horovod.tensorflow.keras as hvd",
                          "for _ in range(3):\n    if os.fork() == 0:\n        while True:\n"
                          "            pass")
# ...whose resume never ends: rank 1 waits for a checkpoint in its own folder, which stays
# empty (the learner's mistake of the second launch);
HANGING_RESUME = with_line(
    script_after(12), "resume_from_epoch = int(hvd.broadcast(",
    "while resume_from_epoch > 0 and hvd.rank() != 0 and not list(Path(args.log_dir).glob("
    "'checkpoint-*.h5')):\n    time.sleep(1)")
# ...and a script stopped after step 4 that runs the reference solution instead of itself
# when it sees the probe.
RUNS_THE_SOLUTION = with_line(
    script_after(4), "import horovod.tensorflow.keras as hvd",
    f"if os.environ.get('WORKBOOK_PROBE_DIR'):\n    import runpy\n    runpy.run_path("
    f"{str(SOLUTIONS_DIR / SOLUTION_FILE_NAME)!r}, run_name='__main__')\n    sys.exit(0)")
