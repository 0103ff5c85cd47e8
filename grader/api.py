"""The grader as the instructor's course (instructor/) and the benchmarks (bench/) use it: their
one entry, so that the grader's rooms can change without them (tests/unit/test_imports.py holds
them to it).

The step verdicts:
    check_step(step, path), check_all(path)   each step by reading the script (grader.Results)
    judge_file(path, sandbox=...)             every step decided: by a run where it shows the
                                              step, by the reading elsewhere (decided_by says)
    decide(static, run)                       the same from a reading's and a run's Results
    JUDGED_VARIABLE                           where a grading kernel finds the decided verdicts
    STEPS                                     the graded steps (the manifest's)
The run for real:
    run_step(step, path, sandbox=...)         the script on RUN_WORKERS workers, its invariants
    RUN_TIMEOUT_S, RUN_WORKERS                its default time limit and its number of workers
    NOT_RUN                                   the outcome of a run that could not start
    positive_seconds                          the type of a --timeout option
    reference_path(step)                      the reference script after a step (a canary run)
    Sandbox, HIDDEN                           the box a student's run goes into, what it hides
The result vocabulary (grader.report):
    PASSED, FAILED, CANT_TELL                 a step's status
    NEITHER, DECIDERS                         who decided a step (NEITHER: neither check could)
    PASS_COLOR, FAIL_COLOR                    their colours in the class's tables
"""

from __future__ import annotations

from grader import JUDGED_VARIABLE, check_all, check_step, judge_file
from grader.decision import decide
from grader.reference import reference_path
from grader.report import CANT_TELL, DECIDERS, FAIL_COLOR, FAILED, NEITHER, PASS_COLOR, PASSED
from grader.running.cli import positive_seconds
from grader.running.outcome import NOT_RUN
from grader.running.run_check import TIMEOUT_S as RUN_TIMEOUT_S
from grader.running.run_check import WORKERS as RUN_WORKERS
from grader.running.run_check import run_step
from grader.running.sandbox import HIDDEN, Sandbox
from workbook.facts import STEPS

__all__ = [
    "CANT_TELL",
    "DECIDERS",
    "FAILED",
    "FAIL_COLOR",
    "HIDDEN",
    "JUDGED_VARIABLE",
    "NEITHER",
    "NOT_RUN",
    "PASSED",
    "PASS_COLOR",
    "RUN_TIMEOUT_S",
    "RUN_WORKERS",
    "STEPS",
    "Sandbox",
    "check_all",
    "check_step",
    "decide",
    "judge_file",
    "positive_seconds",
    "reference_path",
    "run_step",
]
