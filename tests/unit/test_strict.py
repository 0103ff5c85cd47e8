"""check_strict() names a line that really differs, even inside a statement of several lines."""

import re

import pytest

from grader import check_strict
from workbook.paths import REPO

SOLUTIONS = REPO / "solutions"

REFERENCE = '''\
"""Train a model.

Run it with: python train.py --epochs 2
"""

import os

total = (
    1
    + 2
)
model = build(
    "wide_resnet",
    depth=10,
)
'''


def shown_lines(message: str) -> tuple:
    """(your line number, its text, reference line number, its text) from the message."""
    match = re.search(r"your line (\d+) \((.*)\) vs\. reference line (\d+) \((.*)\)$", message)
    assert match, message
    return int(match[1]), match[2], int(match[3]), match[4]


def strict(tmp_path, text: str, reference: str = REFERENCE):
    (tmp_path / "reference.py").write_text(reference, encoding="utf-8")
    (tmp_path / "yours.py").write_text(text, encoding="utf-8")
    return check_strict(tmp_path / "yours.py", reference_path=tmp_path / "reference.py")


@pytest.mark.parametrize(
    "old, new, line",
    [
        ("--epochs 2", "--epochs 3", 3),  # inside a docstring of four lines
        ("+ 2", "- 2", 10),  # an operator on the third line of an expression
        ("depth=10", "depth=16", 14),  # an argument of a call over four lines
        ('"wide_resnet"', '"alexnet"', 13),
    ],
)
def test_reports_the_line_that_differs_inside_a_long_statement(tmp_path, old, new, line):
    result = strict(tmp_path, REFERENCE.replace(old, new))
    assert not result.passed and result.line == line
    yours, your_text, theirs, their_text = shown_lines(result.message)
    assert (yours, theirs) == (line, line)
    assert new in your_text and old in their_text
    assert f"-{REFERENCE.splitlines()[line - 1]}" not in result.expected_diff
    assert f"+{REFERENCE.splitlines()[line - 1]}" in result.expected_diff


def test_a_difference_in_spaces_is_shown_with_the_spaces(tmp_path):
    result = strict(tmp_path, REFERENCE.replace("Train a model.", "Train a model.\t"))
    _, your_text, _, their_text = shown_lines(result.message)
    assert your_text == repr('"""Train a model.\t') and their_text == repr('"""Train a model.')


def test_formatting_inside_a_long_statement_is_no_difference(tmp_path):
    reformatted = REFERENCE.replace('"wide_resnet",\n    depth=10,\n', "'wide_resnet', depth=1_0")
    assert strict(tmp_path, reformatted + "# a comment\n").passed
    changed = reformatted.replace("depth=1_0", "depth=1_1")
    result = strict(tmp_path, changed)
    assert shown_lines(result.message) == (13, "`'wide_resnet', depth=1_1)`", 14, "`depth=10,`")


def test_a_missing_argument_points_at_where_it_is_missing(tmp_path):
    result = strict(tmp_path, REFERENCE.replace("    depth=10,\n", ""))
    assert shown_lines(result.message) == (14, "`)`", 14, "`depth=10,`")


def test_the_starting_script_against_the_solution_names_two_different_lines():
    """The reported bug: both sides showed the docstring's first line, which is the same."""
    starter = (SOLUTIONS / "fashion_mnist.py").read_text(encoding="utf-8").split("\n")
    solution = (SOLUTIONS / "fashion_mnist_solution.py").read_text(encoding="utf-8").split("\n")
    result = check_strict(SOLUTIONS / "fashion_mnist.py")
    yours, your_text, theirs, their_text = shown_lines(result.message)
    assert your_text != their_text
    assert starter[yours - 1] != solution[theirs - 1]
    # It is the first difference: every line before it is the same on both sides.
    assert yours == theirs and starter[: yours - 1] == solution[: theirs - 1]
    assert result.expected_diff  # and the excerpt shows it
