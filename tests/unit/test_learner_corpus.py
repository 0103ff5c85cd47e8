"""The learner-style corpus (tests/grader_cases/learners): every script builds from its base and
its deviation (authoring/learners.py) and parses, lines the chain adds outside its deviation
reach it, and truth.json describes each of them, and only them, in its documented shape."""

import ast
import re

import pytest

from authoring import learners
from authoring.patches import PatchError, apply_patch, parse_patch
from workbook.facts import STEPS
from workbook.paths import REPO

SCRIPTS = learners.deviation_names()
TRUTH = learners.truth()
NEW_LINE = "# a line a new step adds to the chain"


def test_truth_names_every_script_and_only_them():
    assert len(SCRIPTS) >= 60
    assert sorted(TRUTH) == SCRIPTS
    assert not list(learners.CORPUS.glob("*.py")), "scripts are kept as deviations, not copies"


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_builds_parses_and_truth_has_its_shape(name):
    truth = TRUTH[name]
    ast.parse(learners.script(name, truth["base"]), filename=name)
    assert (REPO / truth["base"]).is_file()
    deviation = learners.deviation_path(name).read_text().splitlines()
    assert deviation[:2] == [f"--- {truth['base']}", f"+++ {name}"]
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
    text = learners.script(name, TRUTH[name]["base"]).lower()
    assert not re.search(r"\b(wrong|bug|mistake|incorrect|correct version|truth)\b", text)


def hunk_spans(name: str) -> list[tuple[int, int, int, int]]:
    """(first base line, base lines, first script line, script lines) of each hunk, 0-based."""
    headers = re.findall(
        r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@",
        learners.deviation_path(name).read_text(),
        re.M,
    )
    return [
        (int(old) - 1, int(old_size or 1), int(new) - 1, int(new_size or 1))
        for old, old_size, new, new_size in headers
    ]


def middle_of_longest_gap(spans: list[tuple[int, int, int, int]], base_size: int):
    """(base line, its script line) in the middle of the longest stretch of the base that no
    hunk (context included) touches."""
    gaps = []  # (length, middle base line, script line minus base line there)
    start = offset = 0
    for old, old_size, new, new_size in [*spans, (base_size, 0, 0, 0)]:
        gaps.append((old - start, start + (old - start) // 2, offset))
        start, offset = old + old_size, (new + new_size) - (old + old_size)
    length, middle, offset = max(gaps)
    assert length > 0
    return middle, middle + offset


def with_line(lines: list[str], at: int) -> str:
    return "".join(line + "\n" for line in [*lines[:at], NEW_LINE, *lines[at:]])


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_line_the_chain_adds_outside_the_deviation_reaches_the_script(name):
    """Where the base gains a line between hunks, or among a hunk's context lines (after its
    first, or right next to a line the script removed), the script gains it in the same place
    and is otherwise unchanged."""
    base_name = TRUTH[name]["base"]
    base = (REPO / base_name).read_text().splitlines()
    script = learners.script(name, base_name).splitlines()
    spans = hunk_spans(name)
    places = [middle_of_longest_gap(spans, len(base))]  # (base line, script line)
    hunks = parse_patch(learners.deviation_path(name).read_text())
    for hunk, (old, old_size, new, new_size) in zip(hunks, spans):
        lead, trail = hunk.context_around()
        if lead >= 2:
            places.append((old + 1, new + 1))
        # next to a removed line (next to an added one, either order would be right)
        if lead and hunk.ops[lead] == "-":
            places.append((old + lead, new + lead))
        if trail and hunk.ops[-trail - 1] == "-":
            places.append((old + old_size - trail, new + new_size - trail))
    for at_base, at_script in places:
        assert learners.script(name, base_name, with_line(base, at_base)) == with_line(
            script, at_script
        ), f"a line before line {at_base + 1} of {base_name}"


def test_a_deviation_that_no_longer_applies_names_the_script_and_the_hunk():
    name = "trainer_class.py"
    base_name = TRUTH[name]["base"]
    base = (REPO / base_name).read_text()
    first_removed = next(
        line[1:]
        for line in learners.deviation_path(name).read_text().splitlines()
        if line.startswith("-") and not line.startswith("---") and line[1:].strip()
    )
    with pytest.raises(PatchError) as error:
        learners.script(name, base_name, base.replace(first_removed, first_removed + "  # new"))
    assert str(error.value).startswith(
        f"tests/grader_cases/learners/trainer_class.patch:3: hunk 1 no longer matches {base_name}"
    )
    assert "python -m authoring.learners record" in str(error.value)


def test_the_build_command_writes_the_scripts(tmp_path, capsys):
    assert learners.main(["build", str(tmp_path), "trainer_class.py", "partway_03_if_rank.py"]) == 0
    for name in ("trainer_class.py", "partway_03_if_rank.py"):
        assert (tmp_path / name).read_text() == learners.script(name, TRUTH[name]["base"])
    assert capsys.readouterr().out.split() == [
        str(tmp_path / "trainer_class.py"),
        str(tmp_path / "partway_03_if_rank.py"),
    ]


def test_record_writes_the_deviation_that_gives_back_the_edited_script(tmp_path, monkeypatch):
    name, base_name = "trainer_class.py", TRUTH["trainer_class.py"]["base"]
    edited = learners.script(name, base_name).replace("import ", "import  ", 1)  # a new change
    monkeypatch.setattr(learners, "CORPUS", tmp_path)  # deviations written there
    (tmp_path / "edited.py").write_text(edited)
    assert learners.record(name, tmp_path / "edited.py") == tmp_path / "trainer_class.patch"
    deviation = (tmp_path / "trainer_class.patch").read_text()
    assert deviation.startswith(f"--- {base_name}\n+++ {name}\n")
    assert apply_patch((REPO / base_name).read_text(), deviation) == edited
    with pytest.raises(SystemExit, match="no entry in tests/grader_cases/learners/truth.json"):
        learners.record("new_script.py", tmp_path / "edited.py")
