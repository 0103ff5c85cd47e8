"""Steps and notebooks are separate facts: the manifest (workbook.facts.NOTEBOOKS) numbers the
notebooks, the steps are the step notebooks' steps, and everything else derives from both.

Fast: no kernel, no run. A new graded step (grader/README.md, "Adding a step") is a manifest
entry (workbook/facts.py), its blocks in the chain (solutions/source/), its two checks, the
reading's rule (grader/reading/rules/step_NN.py: STEP, HINT, check) and the run's invariant
(grader/running/invariants/step_NN.py: STEP, TITLE, check), its mistake cases
(tests/grader_cases/mistakes/step_NN.py) and a notebook source (notebooks/src/); these tests say
which is missing. Nothing else lists the steps or counts them: every other part finds them from
the manifest (workbook.facts.STEPS, LAST_STEP).
"""

from __future__ import annotations

import re

import pytest

from authoring import chain, readme
from authoring import notebooks as builder
from grader.reading.rules import RULES
from grader.running import invariants
from grader_cases.mistakes import CASES, STEP_CASES
from workbook import facts
from workbook.facts import BONUS, LESSON, NOTEBOOKS, RUN, STEP, STEP_TITLES, STEPS

KINDS = (LESSON, STEP, RUN, BONUS)


def test_each_step_has_exactly_one_step_notebook_in_step_order():
    steps = [entry.step for entry in NOTEBOOKS if entry.kind == STEP]
    assert steps == list(STEPS) == list(range(1, len(steps) + 1))
    assert all(entry.step is None for entry in NOTEBOOKS if entry.kind != STEP)
    assert all(entry.title and len(entry.title) <= 60 for entry in NOTEBOOKS if entry.kind == STEP)
    assert facts.STEP_TITLES == {entry.step: entry.title for entry in NOTEBOOKS if entry.step}


def test_notebooks_are_numbered_by_their_place_and_named_by_unique_slugs():
    assert [entry.number for entry in NOTEBOOKS] == list(range(len(NOTEBOOKS)))
    slugs = [entry.slug for entry in NOTEBOOKS]
    assert len(set(slugs)) == len(slugs)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", slug) for slug in slugs)
    assert {entry.kind for entry in NOTEBOOKS} <= set(KINDS)
    # Reading order: the welcome, the steps, the run, then the bonus notebooks.
    kinds = [entry.kind for entry in NOTEBOOKS]
    assert kinds == sorted(kinds, key=KINDS.index)
    assert kinds.count(LESSON) == kinds.count(RUN) == 1 and NOTEBOOKS[0].kind == LESSON
    assert facts.notebook_of_kind(RUN).slug == "run_distributed"


def test_the_steps_of_the_chain_and_the_checker_are_the_manifests():
    assert tuple(RULES) == STEPS, "one grader/reading/rules/step_NN.py per step of the manifest"
    assert all(rule.__name__.endswith(f".step_{step:02d}") for step, rule in RULES.items())
    todo_steps = {
        int(n)
        for n in re.findall(
            r"# TODO: Step (\d+)\b", chain.render(chain.SOURCE.read_text(encoding="utf-8"), 0)
        )
    }
    assert todo_steps == set(STEPS), "a `# TODO: Step N` in the starting script for every step"


def test_every_step_declares_its_rule_and_its_run_invariant_in_one_module_each():
    assert all(isinstance(rule.HINT, str) and rule.HINT for rule in RULES.values())
    assert all(callable(rule.check) for rule in RULES.values())
    found = invariants.MODULES
    assert tuple(found) == STEPS, (
        "one grader/running/invariants/step_NN.py per step of the manifest"
    )
    assert all(module.__name__.endswith(f".step_{step:02d}") for step, module in found.items())
    assert all(module.STEP == step and callable(module.check) for step, module in found.items())
    titles = [module.TITLE for module in found.values()]
    assert all(isinstance(title, str) and 0 < len(title) <= 40 for title in titles)
    assert len(set(titles)) == len(titles), "each invariant's title says which step it is"
    # What a step's module may declare besides: of steps that exist, in words.
    assert set(invariants.CANT_SHOW) <= set(STEPS)
    assert all(isinstance(text, str) and text for text in invariants.CANT_SHOW.values())
    assert {invariants.RESUME_STEP, invariants.NOVOGRAD_STEP} <= set(STEPS)


def test_every_step_has_its_mistake_cases():
    assert tuple(STEP_CASES) == STEPS, "one tests/grader_cases/mistakes/step_NN.py per step"
    assert all({case.step for case in cases} == {step} for step, cases in STEP_CASES.items())
    wrong = {case.step for case in CASES if not case.expect_pass}
    assert wrong == set(STEPS), "a wrong version of every step, and of no other"
    assert {case.base_step for case in CASES} <= {0, *STEPS}


def test_the_readmes_table_of_the_steps_is_the_manifests():
    assert readme.stale() == [], "python -m authoring build readme"
    assert all(
        f"| {step} | {title} |" in readme.steps_table() for step, title in STEP_TITLES.items()
    )


def test_every_notebook_has_its_source_and_nothing_else_is_a_source():
    assert sorted(path.name for path in builder.source_files()) == sorted(
        entry.source_name for entry in NOTEBOOKS
    )


# A number written by hand in a text: "notebook 13", "notebooks 14 to 18", a link to
# 13_run_distributed.ipynb, "all twelve steps". The builder's placeholders write them.
HAND_WRITTEN = [
    (re.compile(r"\b[Nn]otebooks?\s+\(?\d"), "notebook N: write notebook {{ number SLUG }}"),
    (
        re.compile(r"\b\d\d_[a-z][a-z0-9_]*(\.ipynb)?\b"),
        "NN_slug: write {{ file SLUG }} or {{ link SLUG }}",
    ),
    (re.compile(r"\}\}\s+(?:to|and|or)\s+\d"), "a list of notebooks: write {{ number SLUG }}"),
    (
        re.compile(rf"\b{builder.in_words(len(STEPS))}\b", re.I),
        "the number of steps: write {{ steps_in_words }}",
    ),
]


@pytest.mark.parametrize("entry", NOTEBOOKS, ids=lambda entry: entry.slug)
def test_no_text_writes_a_notebook_number_by_hand(entry):
    text = builder.source_path(entry).read_text(encoding="utf-8")
    found = [
        f"line {text.count(chr(10), 0, match.start()) + 1}: {match.group(0)!r} ({why})"
        for pattern, why in HAND_WRITTEN
        for match in pattern.finditer(text)
    ]
    assert not found, f"{entry.source_name}: " + "; ".join(found)


def test_the_hand_written_patterns_catch_what_they_are_for():
    caught = [
        "notebook 13 compares",
        "(notebook 00)",
        "Notebook 19",
        "notebooks 14 to 18",
        "notebooks {{ number several_hosts }} to 18",
        "[13_run_distributed](13_run_distributed.ipynb)",
        f"all {builder.in_words(len(STEPS))} steps",
    ]
    for text in caught:
        assert any(pattern.search(text) for pattern, _ in HAND_WRITTEN), text
    for text in [
        "rank 0's weights",
        "step 12",
        "10 classes",
        "gpu[01-02]",
        "up to 100",
        "{{ number run_distributed }}'s",
    ]:
        assert not any(pattern.search(text) for pattern, _ in HAND_WRITTEN), text
