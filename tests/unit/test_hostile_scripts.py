"""Hostile scripts against the checker alone, in this process: a step_decay that computes
something huge is read within the fixed budget and is never a pass (a failure names the line
where the reading stopped), and files that are not files are refused.
"""

from __future__ import annotations

import os
import time

import pytest

from grader import check_step
from grader.report import FAILED, PASSED
from hostile_scripts import BUDGET_SECONDS, HUGE_POWER, SQUARES, script_after, with_line
from workbook.facts import LAST_STEP


@pytest.mark.parametrize(
    "name, text, step, culprit",
    [
        ("huge power", HUGE_POWER, 11, "big = 9 ** 9 ** 9 ** 2"),
        ("repeated squares", SQUARES, 11, "n = n * n"),
        (
            "huge product",
            with_line(script_after(LAST_STEP), "def step_decay", "cells = [0] * 10 ** 10"),
            11,
            "[0] * 10 ** 10",
        ),
        (
            "huge shift",
            with_line(script_after(LAST_STEP), "def step_decay", "bits = 1 << 10 ** 9"),
            11,
            "1 << 10 ** 9",
        ),
        (
            "huge range",
            with_line(script_after(LAST_STEP), "def step_decay", "total = sum(range(10 ** 12))"),
            11,
            "range(10 ** 12)",
        ),
    ],
)
def test_a_script_that_asks_too_much_is_never_a_pass_of_the_reading(
    tmp_path, name, text, step, culprit
):
    """The reading no longer works out a schedule (a run does): a step_decay that computes
    something huge is read within the budget, and is a "can't tell" (the run decides), or a
    failure naming the line where the reading had to stop: never a pass."""
    script = tmp_path / "fashion_mnist.py"
    script.write_text(text)
    started = time.monotonic()
    result = check_step(step, path=script)
    assert time.monotonic() - started < BUDGET_SECONDS, name
    assert result.status != PASSED, (name, result.message)
    if result.status == FAILED:
        assert "could not be checked" in result.message, result.message
        assert culprit in text.splitlines()[result.line - 1], result.message
    else:
        assert "step_decay" in result.message, result.message


def test_files_that_are_not_files_are_refused(tmp_path):
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.py"
    zero.symlink_to("/dev/zero")
    for path in (fifo, zero):
        started = time.monotonic()
        result = check_step(1, path=path)
        assert time.monotonic() - started < 10
        assert not result.passed and "not a regular file" in result.message, result.message
