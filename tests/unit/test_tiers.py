"""The test tiers are folders: every test file is in one, and make check runs the fast two.

tests/unit/ starts no process (its conftest.py fails a test that does), tests/smoke/ starts
short ones and the few real 2-worker runs on the sample, tests/system/ the real runs, servers,
browsers and nbgrader classes. `make check` runs unit and smoke, `make test` everything.
"""

import re

from workbook.paths import REPO

TESTS = REPO / "tests"
TIERS = ("unit", "smoke", "system")


def test_every_test_file_is_in_a_tier():
    outside = [
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("test_*.py")
        if path.relative_to(TESTS).parts[0] not in TIERS
    ]
    assert not outside, f"put each in tests/unit, tests/smoke or tests/system: {outside}"


def test_test_files_have_unique_names():
    """pytest imports a test file by its name (the folders are no packages)."""
    names = [path.name for tier in TIERS for path in (TESTS / tier).glob("test_*.py")]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def test_make_check_runs_the_unit_and_smoke_folders():
    check = re.search(r"^check:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert check and "pytest tests/unit tests/smoke " in check.group(1)


def test_no_test_chooses_its_tier_by_a_mark():
    marked = [
        str(path.relative_to(TESTS))
        for tier in TIERS
        for path in (TESTS / tier).glob("test_*.py")
        if re.search(r"pytest\.mark\.(slow|check)\b", path.read_text())
    ]
    assert not marked, f"the folder is the tier; remove the slow/check marks: {marked}"
