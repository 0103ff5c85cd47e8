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


HUGE_POWER = with_line(script_after(LAST_STEP), "def step_decay", "big = 9 ** 9 ** 9 ** 2")
LONG_LOOP = script_after(6) + "\nfor _ in range(10 ** 12):\n    pass\n"
DEEP = script_after(6) + "\nvalue = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
SQUARES = with_line(
    script_after(LAST_STEP), "def step_decay", "n = 3\n    for _ in range(64):\n        n = n * n"
)

# Scripts that try to choose who judges them, run by the run check (grader/running/run_check.py):
# the finished script that leaves at once when it sees the probe's variable;
EARLY_EXIT_ON_PROBE = with_line(
    script_after(LAST_STEP),
    "import horovod.tensorflow.keras as hvd",
    "if os.environ.get('WORKBOOK_PROBE_DIR'):\n    sys.exit(0)",
)
# ...that starves its own run with busy processes of its own beside its workers;
SELF_STARVING = with_line(
    script_after(LAST_STEP),
    "import horovod.tensorflow.keras as hvd",
    "for _ in range(3):\n    if os.fork() == 0:\n        while True:\n            pass",
)
# ...whose resume never ends: rank 1 waits for a checkpoint in its own folder, which stays
# empty (the learner's mistake of the second launch);
HANGING_RESUME = with_line(
    script_after(LAST_STEP),
    "resume_from_epoch = int(hvd.broadcast(",
    "while resume_from_epoch > 0 and hvd.rank() != 0 and not list(Path(args.log_dir).glob("
    "'checkpoint-*.h5')):\n    time.sleep(1)",
)
# ...and a script stopped after step 4 that runs the reference solution instead of itself
# when it sees the probe.
RUNS_THE_SOLUTION = with_line(
    script_after(4),
    "import horovod.tensorflow.keras as hvd",
    f"if os.environ.get('WORKBOOK_PROBE_DIR'):\n    import runpy\n    runpy.run_path("
    f"{str(SOLUTIONS_DIR / SOLUTION_FILE_NAME)!r}, run_name='__main__')\n    sys.exit(0)",
)

# Scripts that attack what the grader takes from their run (issue 36), the finished script with
# lines added after its training (so it earns what the finished script earns) ...
# ... that leave behind what a copy-back chokes on or keeps: 700 nested folders, a setuid copy,
# links and a pipe among the records, a name with control characters, a thousand files and a
# 50 MB file (within the box's limits: tests/system/test_sandbox.py fills them);
LEAVES_BEHIND = (
    script_after(LAST_STEP)
    + """
import shutil, stat
_records = os.environ.get("WORKBOOK_PROBE_DIR", args.log_dir)
_attacks = [
    lambda: os.makedirs(os.path.join(args.log_dir, *["d"] * 700), exist_ok=True),
    lambda: shutil.copyfile("/usr/bin/true", os.path.join(args.log_dir, "suid")),
    lambda: os.chmod(os.path.join(args.log_dir, "suid"), 0o6777),
    lambda: os.symlink("/etc/shadow", os.path.join(_records, f"run9-rank{hvd.rank()}.json")),
    lambda: os.link(os.path.join(args.log_dir, "suid"), os.path.join(_records, "run9-rank7.json")),
    lambda: os.mkfifo(os.path.join(_records, f"run8-rank{hvd.rank()}.json")),
    lambda: open(os.path.join(args.log_dir, "name\\nwith\\x1b[31mcontrol"), "w").close(),
    lambda: [open(os.path.join(args.log_dir, f"f{n}"), "w").close() for n in range(1000)],
    lambda: open(os.path.join(args.log_dir, "big.bin"), "wb").write(b"x" * (50 << 20)),
]
for _attack in _attacks:
    try:
        _attack()
    except (OSError, MemoryError):
        pass
"""
)


# ... and that reach for what is not theirs: the checkout's roster and an older course's
# gradebook (their paths after the script's own options), the grader's environment in an
# error, 20 MB of output and a double-forked daemon that holds the output open.
def reaching_out(*paths) -> str:
    return (
        script_after(LAST_STEP)
        + f"""
for _path in {[str(p) for p in paths]!r}:
    try:
        print("READ", _path, open(_path).read(), flush=True)
    except OSError as _error:
        print("NOT READ", _path, _error, flush=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(3600)
    os._exit(0)
sys.stdout.write(("z" * 1023 + "\\n") * (20 << 10))
raise RuntimeError(f"the grader's environment: {{dict(os.environ)}}")
"""
    )
