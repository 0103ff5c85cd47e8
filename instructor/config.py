"""The course's nbgrader_config.py: what the workbook changes in nbgrader's defaults, and why."""

from __future__ import annotations

from workbook.facts import LEARNER_SCRIPT_NAME, TF_LOG_LINE

CONFIG_FILE = "nbgrader_config.py"

# Seconds a graded cell may run: a check takes well under a second and is bounded at a few
# seconds of CPU (grader/reading/budget.py), which a loaded machine can stretch; past this, only a
# wedged kernel.
CELL_TIMEOUT = 60

# What an LMS download looks like: a zip with one folder per student id, the files inside it
# (subfolders are fine), e.g. alice/NN_initialize_horovod.ipynb, alice/fashion_mnist.py.
# nbgrader matches the regexp against the absolute path of each extracted file.
ZIP_REGEXP = r".*/extracted/[^/]+/(?P<student_id>[^/]+)/(?:.*/)?(?P<file_id>[^/]+)$"

# stderr that TensorFlow, absl, Horovod and Python's warnings print, which would make nbgrader
# score a check cell 0. IgnorePattern drops a stderr output when one of these matches a line.
IGNORED_STDERR_LINES = [
    (TF_LOG_LINE.pattern, "TensorFlow's and absl's C++ logs"),
    (r"^(WARNING|INFO):(tensorflow|absl):", "their Python loggers"),
    (r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [DIWE] ", "Horovod's log"),
    (r":\d+: \w*Warning: ", "Python warnings: file.py:12: UserWarning: ..."),
]
IGNORED_STDERR = "(?m)" + "|".join(regexp for regexp, _ in IGNORED_STDERR_LINES)

TEMPLATE = """\
# nbgrader's configuration of the Horovod workbook's course.
# Written by `python -m instructor init`; nbgrader reads it when run in this folder.
from instructor.plugins import autograde_preprocessors, sanitize_preprocessors

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = {course_id!r}
# Run outputs (training logs, checkpoints) of the notebooks are not part of a submission.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "logs"]

# release_assignment, fetch_assignment, submit and collect meet here (no root needed).
c.Exchange.root = {exchange!r}
# collect takes only each student's own submissions (owned by their account; the others are
# set aside and named) and copies a link as a link (autograde sets aside those leading out).
c.ExchangeFactory.collect = "instructor.exchange.CollectOwnSubmissions"
# One student's feedback that cannot be released is named; everyone else's is released.
c.ExchangeFactory.release_feedback = "instructor.exchange.ReleaseFeedbackPerStudent"

# The learner's script is the work: grade the submitted one, never the starter in source/.
c.Autograde.exclude_overwriting = {{{assignment!r}: [{script!r}]}}
# Every cell's nbgrader metadata is put back to what generate saved, before nbgrader reads it:
# a cell a learner adds with nbgrader metadata is an ordinary cell (and in the class report).
c.Autograde.sanitize_preprocessors = sanitize_preprocessors()
# Run the graded check cells only, each student in a fresh kernel that only the instructor's
# installation shapes: the grade depends on fashion_mnist.py alone, the other cells train for
# minutes, and nothing a submission holds changes which code checks it.
c.Autograde.autograde_preprocessors = autograde_preprocessors()
c.Execute.timeout = {timeout}  # seconds per check cell
# A check cell the learner deleted is put back and graded like the others.
c.OverwriteCells.add_missing_cells = True
# Library warnings on stderr would score a check cell 0.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = "(?m)" + "|".join(
    [
{pattern}
    ]
)

# zip_collect: downloaded/{assignment}/archive/*.zip holds one folder per student id.
c.FileNameCollectorPlugin.named_regexp = {zip_regexp}
c.FileNameCollectorPlugin.valid_ext = [".ipynb", ".py"]
"""


def raw_string(text: str) -> str:
    """`text` as a raw string literal for the config file."""
    if '"' in text or text.endswith("\\"):
        raise ValueError(f"cannot write {text!r} as a raw string")
    return f'r"{text}"'


def config_text(root, course_id: str, exchange, assignment: str) -> str:
    return TEMPLATE.format(
        root=str(root),
        course_id=course_id,
        exchange=str(exchange),
        assignment=assignment,
        script=LEARNER_SCRIPT_NAME,
        timeout=CELL_TIMEOUT,
        pattern="\n".join(
            f"        {raw_string(regexp)},  # {why}" for regexp, why in IGNORED_STDERR_LINES
        ),
        zip_regexp=raw_string(ZIP_REGEXP),
    )
