"""grader/reference_swap.py: the one-line swap of a crashing step's line for the reference's."""

from __future__ import annotations

import ast

from grader.decision import reference_lines
from grader.reference_swap import failing_lines, swapped
from workbook.paths import REPO

SOLUTION = (REPO / "solutions" / "fashion_mnist_solution.py").read_text(encoding="utf-8")
AVERAGE = "    hvd.callbacks.MetricAverageCallback(),\n"


def line_of(text: str, line: str) -> int:
    return text[: text.index(line)].count("\n") + 1


def test_a_callback_class_becomes_the_references_instance_in_the_scripts_indentation():
    broken = SOLUTION.replace(AVERAGE, "        hvd.callbacks.MetricAverageCallback,\n")
    swap = swapped(broken, [1, line_of(SOLUTION, AVERAGE)], 7)
    assert swap is not None and swap.step == 7
    assert swap.after == "        hvd.callbacks.MetricAverageCallback(),"
    assert swap.source == SOLUTION.replace(AVERAGE, "    " + AVERAGE)
    assert swap.before == "        hvd.callbacks.MetricAverageCallback,"
    assert f"step 7's line {swap.line} swapped for the reference's `hvd" in swap.words()
    ast.parse(swap.source)


def test_no_swap_when_no_line_of_the_step_is_alike_or_the_line_is_already_the_references():
    assert swapped(SOLUTION, [line_of(SOLUTION, AVERAGE)], 7) is None  # already the reference's
    assert swapped(SOLUTION, [1], 7) is None  # the docstring is like no line of step 7
    assert swapped(SOLUTION, [], 7) is None and swapped(SOLUTION, [10**6], 7) is None


def test_a_swap_that_would_not_parse_is_not_made():
    # The same likeness, once on a line of its own and once opening a call over two lines.
    assert swapped("x = hvd.callbacks.MetricAverageCallback\n", [1], 7) is not None
    assert swapped("x = hvd.callbacks.MetricAverageCallback(\n)\n", [1], 7) is None


def test_the_reference_lines_of_a_step_are_its_added_code_lines():
    assert AVERAGE.rstrip("\n") in reference_lines(7)
    assert all(line.strip() and not line.strip().startswith("#") for line in reference_lines(7))


def test_the_lines_of_a_class_passed_for_an_instance_are_those_naming_it():
    from grader.report import Run

    text = "import x\ncb = [hvd.callbacks.MetricAverageCallback]\nmodel.fit(callbacks=cb)\n"
    run = Run(
        "crashed", line=3, culprit={"kind": "callback class", "class": "MetricAverageCallback"}
    )
    assert failing_lines(text, run) == [2]
    assert failing_lines(text, Run("crashed", line=3)) == [3]
    built = Run("crashed", line=3, culprit={"kind": "callback", "class": "X", "line": 1})
    assert failing_lines(text, built) == [1]
