"""Each step decided from both checks (grader/decision.py): the run where it shows the step, the
reading elsewhere, "neither" said as such; and the decided verdict as a check cell reads it
while an instructor grades (grader.check_step with WORKBOOK_JUDGED). No run here: the runs'
Results are made the way grader/running/run_result.py makes them (a real one:
tests/system/test_decision_runs.py).
"""

from __future__ import annotations

import json

import pytest

from grader import JUDGED_VARIABLE, check_step
from grader.decision import (
    NEITHER,
    READING,
    RUN,
    blamed_steps,
    decide,
    step_of_fed_name,
    step_of_line,
)
from grader.report import CANT_TELL, FAILED, PASSED, Result, Results, Run
from grader.running.invariants import finding, not_shown
from workbook.facts import SOLUTION_FILE_NAME, STEPS
from workbook.paths import REPO

SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"


def static(*statuses) -> Results:
    return Results(
        Result(status, f"title {step}", f"read {step}", step=step, hint=f"hint {step}")
        for step, status in enumerate(statuses, start=1)
    )


def run(
    *statuses, outcome="finished", code="", said="", resumed=False, withheld=True, culprit=None
) -> Result:
    """A run's Result; its CANT_TELL findings are `withheld` (the script kept the run from
    showing them, as a crash does) unless told otherwise."""
    details = [
        not_shown(step, f"can't tell: ran {step}")
        if status == CANT_TELL and withheld
        else finding(step, status, f"ran {step}")
        for step, status in enumerate(statuses, 1)
    ]
    return Result(
        FAILED if outcome != "finished" else PASSED,
        "run",
        f"the run {outcome}{said}",
        details=details,
        run=Run(
            outcome,
            seconds=9,
            line=7 if code else None,
            code=code,
            resumed=resumed,
            exception=said,
            culprit=culprit,
        ),
    )


def test_what_the_run_showed_decides_against_the_reading():
    decided = decide(static(FAILED, PASSED), run(PASSED, FAILED))
    assert [(r.status, r.decided_by, r.message) for r in decided] == [
        (PASSED, RUN, "ran 1"),
        (FAILED, RUN, "ran 2"),
    ]
    assert decided[1].hint == "hint 2" and decided[0].hint == ""


def test_the_reading_decides_what_the_run_can_not_see_and_neither_is_said():
    decided = decide(
        static(FAILED, CANT_TELL, PASSED), run(CANT_TELL, CANT_TELL, CANT_TELL, withheld=False)
    )
    assert [(r.status, r.decided_by) for r in decided] == [
        (FAILED, READING),
        (CANT_TELL, NEITHER),
        (PASSED, READING),
    ]
    assert "decided by reading the script: ran 1" in decided[0].message
    assert decided[1].message.startswith("neither check could decide; counted as done for now")
    assert "The run: ran 2. The reading: read 2" in decided[1].message
    assert decided[1].passed  # the documented default, listed in the class report


def test_without_a_run_the_reading_decides_and_says_so():
    decided = decide(static(PASSED, CANT_TELL), None)
    assert [r.decided_by for r in decided] == [READING, NEITHER]
    assert "the script was not run" in decided[0].message


def test_a_crash_is_blamed_on_the_step_whose_line_it_is():
    novograd = "opt = tfa.optimizers.NovoGrad(learning_rate=scaled_lr, momentum=args.momentum)"
    statuses = [PASSED] * len(STEPS)
    shown = [PASSED] * 3 + [CANT_TELL] * (len(STEPS) - 3)
    decided = decide(static(*statuses), run(*shown, outcome="crashed", code=novograd))
    assert decided[11].status == FAILED and decided[11].decided_by == RUN
    assert "did not get through this step on 2 workers: the run crashed" in decided[11].message
    assert decided[11].expected_diff  # the step's change, to compare with
    assert step_of_line(novograd, list(STEPS)) == 12


def test_steps_the_script_kept_the_run_from_showing_earn_nothing():
    """The reading is sure they are done; the run stopped before it showed them: no credit,
    and the message says what stopped the run, where, and what it did show."""
    shown = [PASSED] * 3 + [CANT_TELL] * (len(STEPS) - 3)
    decided = decide(
        static(*[PASSED] * len(STEPS)),
        run(*shown, outcome="crashed", code="x = 1 / 0", said=": ZeroDivisionError"),
    )
    assert [(r.status, r.decided_by) for r in decided[:3]] == [(PASSED, RUN)] * 3
    assert {(r.status, r.decided_by) for r in decided[3:]} == {(FAILED, RUN)}
    assert decided[3].message == (
        "not credited, as the run did not show this step: the run crashed: ZeroDivisionError; "
        "so ran 4 (it showed steps 1, 2 and 3 to hold)"
    )
    assert decided[3].line == 7 and decided[3].expected_diff and decided[3].hint == "hint 4"


def test_a_finished_run_that_never_did_a_step_credits_it_not():
    """An early exit (the probe seen), no checkpoint at all: the run finished and showed
    nothing of the step; the reading does not decide it."""
    decided = decide(static(PASSED, PASSED), run(PASSED, CANT_TELL))
    assert (decided[1].status, decided[1].decided_by) == (FAILED, RUN)
    assert decided[1].message == (
        "not credited, as the run did not show this step: ran 2 (it showed step 1 to hold)"
    )


def test_a_crash_at_a_step_the_run_had_shown_to_hold_is_that_steps():
    load = "custom_optimizers=[tfa.optimizers.NovoGrad],"
    shown = [PASSED] * 7 + [CANT_TELL] + [PASSED] * (len(STEPS) - 8)
    decided = decide(static(*[PASSED] * len(STEPS)), run(*shown, outcome="crashed", code=load))
    assert (decided[11].status, decided[11].decided_by) == (FAILED, RUN)
    assert "did not get through this step" in decided[11].message
    assert (decided[7].status, decided[7].decided_by) == (FAILED, RUN)  # never shown
    assert decided[7].message.startswith("not credited")
    assert [r.step for r in decided if r.passed] == [step for step in STEPS if step not in (8, 12)]


@pytest.mark.parametrize(
    "code, said, blamed",
    [
        # every rank loading the checkpoint: rank 1 has none (the statement's first line is step 8's)
        ("model = hvd.load_model(", "OSError: No file or directory found at /x/ckpt-2.h5", {8}),
        # load_model without NovoGrad among its custom objects: the resume and step 12
        (
            "model = hvd.load_model(",
            "ValueError: Unknown optimizer: 'NovoGrad'. Please ensure",
            {8, 12},
        ),
        # tfa imported in the fresh start's branch only
        (
            "custom_optimizers=[tfa.optimizers.NovoGrad],",
            "UnboundLocalError: cannot access local variable 'tfa'",
            {8, 12},
        ),
        # what the call could have had is not what failed ('lr' is step 11's name)
        (
            "tfa.optimizers.NovoGrad(learning_rate=scaled_lr, momentum=args.momentum))",
            "TypeError: Unexpected keyword argument passed to optimizer: momentum. Allowed kwargs "
            "are {'lr', 'decay'}.",
            {8, 12},
        ),
    ],
)
def test_a_crash_while_resuming_is_the_resumes_and_the_steps_it_names(code, said, blamed):
    shown = [PASSED] * 7 + [CANT_TELL] + [PASSED] * (len(STEPS) - 8)
    decided = decide(
        static(*[PASSED] * len(STEPS)),
        run(*shown, outcome="crashed", code=code, said=said, resumed=True),
    )
    assert {r.step for r in decided if r.status == FAILED} == blamed
    assert {r.decided_by for r in decided if r.step in blamed} == {RUN}


def test_a_crash_while_resuming_after_a_step_shown_broken_is_not_blamed_on_another():
    """op=hvd.Sum on the rank that builds its optimizer, Average on the one that loads it: the
    resume's allreduce fails for step 4's fault, which the first run showed; the resume was
    never shown, so it earns nothing, but it is not blamed."""
    shown = [PASSED] * 3 + [FAILED] + [PASSED] * 3 + [CANT_TELL] + [PASSED] * (len(STEPS) - 8)
    decided = decide(
        static(*[PASSED] * len(STEPS)),
        run(
            *shown,
            outcome="crashed",
            resumed=True,
            code="model.fit(train_dataset, epochs=args.epochs,",
            said="FailedPreconditionError: Mismatched reduction operation",
        ),
    )
    assert {r.step for r in decided if r.status == FAILED} == {4, 8}
    assert decided[3].message == "ran 4" and decided[7].message.startswith("not credited")


def test_a_crash_no_step_owns_is_blamed_on_none():
    decided = decide(
        static(PASSED, PASSED, PASSED),
        run(PASSED, CANT_TELL, CANT_TELL, outcome="crashed", code="x = 1 / 0"),
    )
    assert [(r.status, r.decided_by) for r in decided] == [
        (PASSED, RUN),
        (FAILED, RUN),
        (FAILED, RUN),
    ]
    assert not any("did not get through" in r.message for r in decided)


# The mis-blames of issue 37, as the probe records them: (the script's innermost line, the
# error, what the failing library frame worked on, the step on the path, the step blamed before).
MISBLAMES = {
    "a callback class passed instead of an instance": (
        "model.fit(train_dataset, steps_per_epoch=steps_per_epoch, callbacks=callbacks, "
        "epochs=args.epochs, verbose=verbose)",
        "TypeError: Callback.set_model() missing 1 required positional argument: 'model'",
        {"kind": "callback class", "class": "MetricAverageCallback", "line": None, "code": ""},
        7,
    ),
    "a resume epoch left a tensor, printed": (
        "print(json.dumps({'resume_from_epoch': resume_from_epoch, 'rank': hvd.rank()}))",
        "TypeError: Object of type EagerTensor is not JSON serializable",
        None,
        8,
    ),
    "the warmup callback's arguments in the wrong order": (
        "model.fit(train_dataset, steps_per_epoch=steps_per_epoch, callbacks=callbacks, "
        "epochs=args.epochs, verbose=verbose)",
        "TypeError: '<' not supported between instances of 'int' and 'function'",
        {
            "kind": "callback",
            "class": "LearningRateScheduleCallback",
            "line": 330,
            "code": "hvd.callbacks.LearningRateScheduleCallback(scaled_lr, step_decay, 1),",
        },
        11,
    ),
    "a CSVLogger on every rank whose folder is missing on rank 1": (
        "model.fit(train_dataset, steps_per_epoch=steps_per_epoch, callbacks=callbacks, "
        "epochs=args.epochs, verbose=verbose)",
        "NotFoundError: /run/logs-rank1-run1/training.csv; No such file or directory",
        {
            "kind": "callback",
            "class": "CSVLogger",
            "line": 340,
            "code": "callbacks.append(tf.keras.callbacks.CSVLogger(os.path.join(args.log_dir, "
            "'training.csv')))",
        },
        9,
    ),
}


@pytest.mark.parametrize("case", sorted(MISBLAMES))
def test_a_crash_is_blamed_on_the_step_whose_code_is_on_the_failing_path(case):
    code, said, culprit, step = MISBLAMES[case]
    decided = decide(
        static(*[PASSED] * len(STEPS)),
        run(*[CANT_TELL] * len(STEPS), outcome="crashed", code=code, said=said, culprit=culprit),
    )
    blamed = [r.step for r in decided if "did not get through this step" in r.message]
    assert blamed == [step], case
    assert not any(r.passed for r in decided)  # the run showed nothing: nothing is credited


def test_a_passed_run_does_not_overrule_what_only_the_reading_shows():
    decided = decide(static(PASSED, FAILED), run(PASSED, PASSED))
    assert decided[1].status == FAILED and decided[1].decided_by == READING
    assert "on one host the rank and the local rank are equal" in decided[1].message


def test_a_check_cell_returns_the_verdict_decided_beforehand(tmp_path, monkeypatch):
    decided = decide(static(*[PASSED] * len(STEPS)), run(*[FAILED] * len(STEPS)))
    judged = tmp_path / "judged.json"
    judged.write_text(json.dumps({"results": [r.to_dict() for r in decided]}))
    monkeypatch.setenv(JUDGED_VARIABLE, str(judged))
    result = check_step(4, SOLUTION)
    assert (result.status, result.decided_by, result.message) == (FAILED, RUN, "ran 4")
    assert "Decided by the run." in str(result) and "Decided by the run." in result._repr_html_()
    judged.write_text("{not json")
    result = check_step(4, SOLUTION)
    assert result.passed and result.decided_by == READING
    assert "by reading only: its decided verdicts could not be read" in result.message


def test_a_swap_shows_the_steps_after_a_crash_while_resuming_but_not_the_resume():
    """NovoGrad imported only on the fresh start: the resume crashes on `tfa`. The second run,
    with the import added, shows step 11's rates after resuming; the resume itself (step 8) stays
    failed: the script could not resume, whoever's line broke it."""
    from grader.decision import after_the_swap
    from grader.reference_swap import Swap

    steps = len(STEPS)
    shown = [PASSED] * 7 + [CANT_TELL] + [PASSED] * 2 + [CANT_TELL] + [PASSED] * (steps - 11)
    first = run(
        *shown,
        outcome="crashed",
        resumed=True,
        code="custom_optimizers=[tfa.optimizers.NovoGrad],",
        said="UnboundLocalError: cannot access local variable 'tfa'",
    )
    reading = static(*[PASSED] * steps)
    decided = decide(reading, first)
    swap = Swap("source", 12, 5, "", "    import tensorflow_addons as tfa", added=True)
    after = after_the_swap(decided, reading, first, swap, run(*[PASSED] * steps))
    assert {r.step for r in after if r.status == FAILED} == {8, 12}
    assert after[10].status == PASSED and "shown by a second run with step 12's" in (
        after[10].message
    )
    assert after[7].message == decided[7].message  # the resume's verdict is the first run's


def test_a_crash_on_a_value_made_one_assignment_back_is_blamed_on_the_step_that_made_it(tmp_path):
    """The solution's RESULT line prints a dict holding the resume epoch, which a learner left
    a tensor (step 8's line): json.dumps fails on a line no step owns, and the blame follows
    `result` back to the names it was made of. Without the script's text: no blame."""
    source = (REPO / "solutions" / SOLUTION_FILE_NAME).read_text(encoding="utf-8")
    source = source.replace(
        'int(hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch"))',
        'hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch")',
    )
    script = tmp_path / "fashion_mnist.py"
    script.write_text(source, encoding="utf-8")
    code = 'print("RESULT " + json.dumps(result), flush=True)'
    crashed = run(
        *[PASSED] * 7 + [CANT_TELL] * (len(STEPS) - 7),
        outcome="crashed",
        code=code,
        said="TypeError: Object of type EagerTensor is not JSON serializable",
    )
    crashed.run.line = [line.strip() for line in source.splitlines()].index(code) + 1
    assert blamed_steps(crashed, {d.step: d for d in crashed.details}) == set()  # no path
    crashed.path = str(script)
    assert blamed_steps(crashed, {d.step: d for d in crashed.details}) == {8}


def test_a_crash_on_names_the_script_assigns_as_the_reference_does_is_blamed_on_no_step():
    """`model` is assigned by step 8's line (hvd.load_model) and the starting script's: a crash
    in the solution's own model.evaluate, or its RESULT line, is no step's mistake."""
    source = (REPO / "solutions" / SOLUTION_FILE_NAME).read_text(encoding="utf-8")
    lines = [line.strip() for line in source.splitlines()]
    for failing in (
        'print("RESULT " + json.dumps(result), flush=True)',
        next(line for line in lines if "model.evaluate(" in line),
    ):
        assert step_of_fed_name(source, lines.index(failing) + 1, list(STEPS)) is None, failing
