"""instructor/class_verdicts.py without runs: which saved judgement is reused, and students who handed
in the same bytes share one judgement. Judging with runs, through make grade:
tests/system/test_graded_classes.py and test_redteam.py."""

from __future__ import annotations

import pytest

from instructor import class_verdicts
from instructor.class_verdicts import JudgedWith
from instructor.course import init
from workbook.facts import LEARNER_SCRIPT_NAME, STEPS, chain_file_name
from workbook.paths import SOLUTIONS_DIR

SAVED = {"sha256": "abc", "ran": True, "run_timeout": 60.0, "results": []}


@pytest.mark.parametrize(
    "way, digest, reused",
    [
        (JudgedWith(True, 60.0), "abc", True),
        (JudgedWith(True, 120.0), "abc", False),  # another time limit: the run may end otherwise
        (JudgedWith(False, None), "abc", False),  # read only: never instead of a run, or after
        (JudgedWith(True, 60.0), "def", False),  # another script
        (JudgedWith(True, 60.0), "", False),  # no script to fingerprint
    ],
)
def test_a_saved_judgement_is_reused_only_when_made_the_same_way(way, digest, reused):
    assert way.made(SAVED, digest) is reused
    assert not way.made(None, digest)


def test_identical_scripts_share_one_judgement_and_a_second_pass_reuses_it(tmp_path):
    course = init(tmp_path / "course", steps=[1, 6])
    scripts = {"ann": chain_file_name(6), "bea": chain_file_name(6), "cid": chain_file_name(1)}
    for student, name in scripts.items():
        folder = course.folder("submitted", student)
        folder.mkdir(parents=True)
        (folder / LEARNER_SCRIPT_NAME).write_bytes((SOLUTIONS_DIR / name).read_bytes())
    said = []
    judged = class_verdicts.judge_class(course, list(scripts), runs=False, echo=said.append)
    assert [j.reused for j in judged] == [False, True, False]
    assert said[1] == f"bea: judged as ann's identical script, 6/{len(STEPS)} steps"
    bea = class_verdicts.load(course, "bea")
    assert bea["ran"] is False and bea["run_timeout"] is None
    own = str(course.folder("submitted", "bea") / LEARNER_SCRIPT_NAME)
    assert {item["path"] for item in bea["results"]} == {own}  # its verdicts name its script
    # Graded again: nothing judged anew, nothing said.
    said.clear()
    again = class_verdicts.judge_class(course, list(scripts), runs=False, echo=said.append)
    assert [j.reused for j in again] == [True, True, True] and said == []


@pytest.mark.parametrize("given", ["0", "-3", "nan", "inf", "soon"])
@pytest.mark.parametrize(
    "command",
    [
        ["instructor", "autograde", "course", "--run-timeout"],
        ["grader", "run", "fashion_mnist.py", "--timeout"],
    ],
)
def test_a_time_limit_that_is_no_positive_number_is_refused(command, given, capsys):
    """The instructor's grading and the learner's run check take a run's limit the same way."""
    import importlib

    build_parser = importlib.import_module(f"{command[0]}.__main__").build_parser
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args([*command[1:], given])
    assert stopped.value.code == 2
    assert f"'{given}' is not a positive number of seconds" in capsys.readouterr().err
    assert (
        vars(build_parser().parse_args([*command[1:], "45"]))[
            command[-1].lstrip("-").replace("-", "_")
        ]
        == 45
    )


class FakeBox:
    """Stands in for a sandbox: counts its copies' close() calls, reports a limit reached."""

    closed = 0

    def fresh(self):
        return FakeBox()

    @property
    def weaker(self):
        return ""

    def close(self):
        FakeBox.closed += 1

    def hit(self):
        return ["output"]


@pytest.mark.parametrize("machine", ["", "no bubblewrap (bwrap) here"])
def test_one_students_failed_run_fails_that_student_alone(tmp_path, monkeypatch, machine):
    """A run that could not be made (here: judge_file raising, as a RecursionError in reading
    its records did) leaves that student not judged, with the command that judges them again,
    and the others judged; only when the reference can't run either does the class stop."""
    from grader import api

    course = init(tmp_path / "course", steps=[1, 6])
    first = (SOLUTIONS_DIR / chain_file_name(1)).read_text()
    scripts = {
        "ann": (SOLUTIONS_DIR / chain_file_name(6)).read_text(),
        "bob": first,
        "cid": first + "# cid's own\n",
    }
    for student, text in scripts.items():
        folder = course.folder("submitted", student)
        folder.mkdir(parents=True)
        (folder / LEARNER_SCRIPT_NAME).write_text(text)
    asked = []

    def judge_file(script, *, sandbox, timeout):
        if "bob" in str(script):
            raise RecursionError("maximum recursion depth exceeded")
        return api.decide(api.check_all(script), None)

    monkeypatch.setattr(api, "judge_file", judge_file)
    monkeypatch.setattr(class_verdicts.Canary, "_ask", lambda self, box: asked.append(1) or machine)
    said, FakeBox.closed = [], 0
    if machine:
        with pytest.raises(
            class_verdicts.CourseError,
            match="no script can be run for grading on "
            "this machine.*no bubblewrap.*bob's: RecursionError",
        ):
            class_verdicts.judge_class(
                course, ["ann", "bob", "cid"], sandbox=FakeBox(), jobs=2, echo=said.append
            )
        return
    judged = class_verdicts.judge_class(
        course, ["ann", "bob", "cid"], sandbox=FakeBox(), jobs=2, echo=said.append
    )
    assert [bool(j.problem) for j in judged] == [False, True, False]
    assert judged[0].limits == ["output"] and asked == [1]  # the canary, once
    assert FakeBox.closed == 3  # every student's box released, the failed one's too
    bob = next(line for line in said if line.startswith("bob: "))
    assert "NOT JUDGED" in bob and "RecursionError" in bob
    assert f"python -m instructor autograde {course.root} --student bob --force" in bob
    assert class_verdicts.load(course, "bob") is None  # judged again next time
    assert class_verdicts.load(course, "ann")["limits"] == ["output"]


def test_the_class_report_names_limits_twins_and_runs_not_judged():
    from instructor.class_report import AUTOGRADE_FAILED, GRADED, ClassReport, StudentRow

    rows = [
        StudentRow("ann", GRADED, {1: True}, limits=["memory", "output"]),
        StudentRow("bea", GRADED, {1: True}, twin_of="ann"),
        StudentRow(
            "cid",
            AUTOGRADE_FAILED,
            reason=f"{class_verdicts.NOT_JUDGED}: RecursionError: "
            "maximum recursion depth exceeded; then: python -m instructor ...",
        ),
    ]
    text = ClassReport("horovod_steps", [1], rows).summary()
    assert "  ann: memory, output" in text.split("reached a limit")[1]
    assert "  bea: shares ann's run" in text.split("(twins)")[1]
    assert (
        "  cid: its run could not be judged: RecursionError"
        in text.split("could not be judged (not graded")[1]
    )
