"""The learner-style corpus (tests/grader_cases/learners): every script parses, and truth.json
describes each of them, and only them, in its documented shape."""

import ast
import json
import re
from pathlib import Path

import pytest

from workbook.facts import STEPS

CORPUS = Path(__file__).resolve().parents[1] / "grader_cases" / "learners"
SCRIPTS = sorted(path.name for path in CORPUS.glob("*.py"))
TRUTH = json.loads((CORPUS / "truth.json").read_text())


def test_truth_names_every_script_and_only_them():
    assert len(SCRIPTS) >= 60
    assert sorted(TRUTH) == SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_parses_and_truth_has_its_shape(name):
    ast.parse((CORPUS / name).read_text(), filename=name)
    truth = TRUTH[name]
    assert (Path(__file__).resolve().parents[2] / truth["base"]).is_file()
    assert truth["kind"] in {"correct", "wrong", "partway"}
    assert sorted(truth["steps"], key=int) == [str(step) for step in STEPS]
    assert all(isinstance(value, bool) for value in truth["steps"].values())
    assert set(truth["why"]) <= set(truth["steps"]) and truth["how"]
    assert set(truth) <= {"base", "kind", "steps", "why", "how", "unshown"}
    for step in truth.get("unshown", []):  # code done, but no run shows it: not credited
        assert (
            truth["steps"][str(step)] is False
            and "no run of this script" in truth["why"][str(step)]
        )
    if truth["kind"] == "correct":
        assert all(truth["steps"].values())
    else:
        assert not all(truth["steps"].values())
    if truth["kind"] == "partway":
        done = [step for step in STEPS if truth["steps"][str(step)]]
        assert done == list(range(1, len(done) + 1)), "a part-way script's steps done come first"


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_carries_no_verdict(name):
    text = (CORPUS / name).read_text().lower()
    assert not re.search(r"\b(wrong|bug|mistake|incorrect|correct version|truth)\b", text)
