"""The checker's one result vocabulary (grader/report.py): the static check, strict mode, the
batch grader and the class report say PASSED, FAILED or CANT_TELL the same way, and a Result
reads the same in text, HTML and JSON whichever check made it. (The run-for-real check's use of
it: tests/unit/test_run_check_records.py.)
"""

from __future__ import annotations

import json

import pytest

from checked_files import after, written
from grader import check_all, check_step, check_strict
from grader.report import CANT_TELL, FAILED, MARKS, PASSED, STATUSES, Result, worst
from grader_cases.mistakes import CASES
from instructor.class_report import GRADED, StudentRow
from instructor.heatmap import COLORS
from workbook.facts import STEPS

DOUBTS = [case for case in CASES if case.expect_pass and "can't tell" in case.expect_message]


# --- the static check ------------------------------------------------------------------------


def test_a_done_step_passes_and_a_missing_one_fails_with_its_hint_and_diff():
    results = check_all(after(3))
    assert [result.status for result in results] == [PASSED] * 3 + [FAILED] * (len(STEPS) - 3)
    done, missing = results[2], results[3]
    assert done.passed and done.message == "done" and str(done) == f"[PASS] {done.label}\n  done"
    assert not missing.passed and missing.hint and missing.expected_diff
    text = str(missing).splitlines()
    assert text[0] == f"[FAIL] Step 4: {missing.title}" and text[2] == f"  Hint: {missing.hint}"
    assert text[3] == "  Expected change:"


@pytest.mark.parametrize("case", DOUBTS, ids=lambda case: case.id)
def test_what_the_grader_cannot_tell_is_cant_tell_and_counts_as_done(tmp_path, case):
    result = check_step(case.step, written(tmp_path, case.apply(after(case.base_step).read_text())))
    assert result.status == CANT_TELL and result.passed, str(result)
    assert result.message.startswith("done (the grader can't tell for sure: ")
    assert str(result).startswith("[PASS] ")  # the learner sees a pass, with the doubt
    data = json.loads(result.to_json())
    assert data["status"] == CANT_TELL and data["passed"] is True


def test_advice_is_a_pass_not_a_doubt(tmp_path):
    """A step done by another route that works (rules.common.Advice) passes with a note: the
    metrics averaged before the broadcast trains alike."""
    broadcast = "    hvd.callbacks.BroadcastGlobalVariablesCallback(0),\n"
    average = "    hvd.callbacks.MetricAverageCallback(),\n"
    text = after(11).read_text()
    assert text.count(broadcast) == text.count(average) == 1
    text = text.replace(broadcast, "").replace(average, average + broadcast)
    result = check_step(7, written(tmp_path, text))
    assert result.status == PASSED and result.message.startswith("done (note: line ")


def test_strict_mode_says_passed_or_failed(tmp_path):
    assert check_strict(after(5), after(5)).status == PASSED
    differs = check_strict(after(4), after(5))
    assert differs.status == FAILED and differs.line and differs.expected_diff


def test_a_file_problem_fails_every_step_as_a_file_problem(tmp_path):
    results = check_all(written(tmp_path, "import horovod.tensorflow.keras as hvd\nhvd.init(\n"))
    assert {result.status for result in results} == {FAILED}
    assert all(result.file_problem and result.line == 2 for result in results)


# --- the type ----------------------------------------------------------------------------------


def test_only_the_three_statuses_exist():
    assert STATUSES == (PASSED, FAILED, CANT_TELL) and set(MARKS) == set(STATUSES)
    with pytest.raises(ValueError, match="status must be one of"):
        Result("holds", "x", "y")
    assert worst([PASSED, CANT_TELL, PASSED]) == CANT_TELL
    assert worst([CANT_TELL, FAILED]) == FAILED and worst([]) == PASSED


def test_a_result_with_details_shows_each_with_its_mark():
    parts = [
        Result(PASSED, "a", "same", step=4),
        Result(FAILED, "b", "differ", step=5, hint="Broadcast."),
        Result(CANT_TELL, "c", "can't tell: z", step=6),
    ]
    whole = Result(worst(part.status for part in parts), "Whole", "three parts", details=parts)
    lines = str(whole).splitlines()
    assert lines[:2] == ["[FAIL] Whole", "  three parts"]
    assert lines[2:] == [
        "  [ok] step 4: same",
        "  [NO] step 5: differ",
        "         Hint: Broadcast.",
        "  [??] step 6: can't tell: z",
    ]
    page = whole._repr_html_()
    assert page.count("<li") == 3 and "not yet" in page and "<em>Hint:</em> Broadcast." in page
    data = json.loads(whole.to_json())
    assert [d["status"] for d in data["details"]] == [PASSED, FAILED, CANT_TELL]
    assert data["run"] is None and data["passed"] is False


# --- the batch grader ------------------------------------------------------------------------


# --- the class report --------------------------------------------------------------------------


def test_the_class_report_says_a_steps_verdict_in_the_same_words():
    row = StudentRow("ann", GRADED, {1: True, 2: False, 3: None})
    assert [row.verdict(step) for step in (1, 2, 3)] == [PASSED, FAILED, None]
    assert [row.cell(step) for step in (1, 2, 3)] == [PASSED, FAILED, "no grade"]
    assert row.passed == 1 and row.first_not_passed == 2
    assert {PASSED, FAILED} <= set(COLORS)
