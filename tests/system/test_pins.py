"""The pinned environment installs on the oldest Python 3.11 (Debian 12 has 3.11.2): every pin of
requirements/constraints.txt has a release file for it and none is yanked (pip's dry run
against the package index; skipped when the index can't be reached)."""

from __future__ import annotations

import pytest

from bootstrap.environment import REQUIREMENTS
from bootstrap.pins import OLDEST, PinsUnchecked, bad_pins


def check(constraints):
    try:
        return bad_pins(constraints, timeout=300)
    except PinsUnchecked as error:
        pytest.skip(str(error))


def test_every_pin_installs_on_the_oldest_python_3_11():
    assert check(REQUIREMENTS / "constraints.txt") == []


def test_a_pin_that_needs_a_newer_python_or_is_yanked_is_named(tmp_path):
    constraints = tmp_path / "constraints.txt"
    # soupsieve 4.1.2 needs Python 3.11.5; 3.0.1 is yanked for 3.11 before 3.11.5.
    constraints.write_text("# pins\nsix==1.17.0\nsoupsieve==4.1.2\npackaging==24.2\n")
    assert check(constraints) == [
        f"soupsieve==4.1.2: no release of it installs on Python {OLDEST} here"
    ]
    constraints.write_text("soupsieve==3.0.1 ; python_version >= '3'\n")
    assert check(constraints) == ["soupsieve==3.0.1: yanked (pip would install it, with a warning)"]
