"""The run-for-real check (grader/running/) on records written the way the probe writes them
(grader/running/probe.py's Record), without a run: every invariant is seen to hold, fail and say
"can't tell". Real runs on 2 workers: tests/system/test_run_check.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.report import CANT_TELL, FAILED, PASSED, Result
from grader.running import run_step
from grader.running.evidence import Evidence
from grader.running.invariants import finding, not_shown
from grader.running.outcome import (
    CRASHED,
    FINISHED,
    HUNG,
    NOT_RUN,
    UNFINISHED,
    Outcome,
    from_the_script_on,
    mismatched_training,
    outcome_of,
    stuck_collective,
)
from grader.running.probe import Record, private_log_dir
from grader.running.run_result import run_result
from workbook.facts import LAST_STEP, STEPS

# --- records as the probe writes them ------------------------------------------------------


def write_rank(folder: Path, rank: int, run: int = 1, **data) -> Record:
    record = Record(str(folder), "/x/fashion_mnist.py", run, rank)
    record.data.update(data)
    record.save()
    return record


FIT = {
    "initial_epoch": 0,
    "epochs": 1,
    "steps_per_epoch": 4,
    "callbacks": [],
    "optimizer": "SGD",
    "distributed_optimizer": True,
    "dataset": True,
    "line": 350,
    "code": "model.fit(",
    "top_line": 350,
}


# --- how a run ended --------------------------------------------------------------------------


def waiting_at(line: int, call: str = "hvd.broadcast", top_line: int | None = None) -> dict:
    return {
        "call": call,
        "name": "resume_from_epoch",
        "line": line,
        "code": "x = hvd.broadcast(x)",
        "top_line": top_line or line,
    }


def test_a_collective_another_rank_went_past_is_a_hang(tmp_path):
    write_rank(tmp_path, 0, waiting=waiting_at(313), stages=[[1, "started the script"]])
    write_rank(tmp_path, 1, fit=FIT, stages=[[1, "started the script"], [2, "started model.fit"]])
    stuck = stuck_collective(Evidence.read(tmp_path, 2), runs=1)
    assert stuck == (
        "rank 0 waits in hvd.broadcast at line 313 (`x = hvd.broadcast(x)`), which "
        "rank 1 went past without calling it: rank 1 was training in model.fit at "
        "line 350"
    )


def test_a_rank_not_there_yet_is_no_hang(tmp_path):
    write_rank(tmp_path, 0, waiting=waiting_at(313), stages=[[1, "started the script"]])
    write_rank(tmp_path, 1, stages=[[0, "started"], [1, "started the script"]])
    assert stuck_collective(Evidence.read(tmp_path, 2), runs=1) is None
    write_rank(tmp_path, 1, waiting=waiting_at(313), stages=[[1, "started the script"]])
    assert stuck_collective(Evidence.read(tmp_path, 2), runs=1) is None  # both there: it ends


def test_a_collective_in_a_callback_waits_at_model_fit(tmp_path):
    """A callback's allreduce waits while the other rank still trains its last batch."""
    stages = [[1, "started model.fit"]]
    write_rank(tmp_path, 0, fit=FIT, stages=stages, waiting=waiting_at(120, top_line=350))
    write_rank(tmp_path, 1, fit=FIT, stages=stages)
    assert stuck_collective(Evidence.read(tmp_path, 2), runs=1) is None


def test_a_collective_in_a_function_counts_where_it_was_called(tmp_path):
    write_rank(tmp_path, 0, waiting=waiting_at(120, top_line=400), stages=[[1, "x"]])
    write_rank(tmp_path, 1, fit=FIT, stages=[[1, "started model.fit"]])
    assert stuck_collective(Evidence.read(tmp_path, 2), runs=1) is None  # 350: not there yet
    write_rank(tmp_path, 0, waiting=waiting_at(120, top_line=300), stages=[[1, "x"]])
    assert "rank 0 waits in hvd.broadcast at line 120" in stuck_collective(
        Evidence.read(tmp_path, 2), runs=1
    )


def test_between_two_runs_a_rank_is_on_its_way(tmp_path):
    write_rank(tmp_path, 0, finished=True)
    write_rank(tmp_path, 1, finished=True)
    write_rank(tmp_path, 0, run=2, waiting=waiting_at(313))
    assert stuck_collective(Evidence.read(tmp_path, 2), runs=2) is None
    write_rank(tmp_path, 1, run=2, fit=FIT, stages=[[1, "started model.fit"]])
    assert "of the second run, which rank 1 went past" in stuck_collective(
        Evidence.read(tmp_path, 2), runs=2
    )


def test_ranks_that_train_different_numbers_of_steps_cannot_finish(tmp_path):
    stages = [[1, "started model.fit"]]
    write_rank(tmp_path, 0, run=2, fit={**FIT, "initial_epoch": 1, "epochs": 2}, stages=stages)
    write_rank(tmp_path, 1, run=2, fit={**FIT, "initial_epoch": 0, "epochs": 2}, stages=stages)
    assert mismatched_training(Evidence.read(tmp_path, 2)) == (
        "the ranks train different numbers of steps in model.fit: rank 0 4 (after epoch 1), "
        "rank 1 8 (from the start); every step averages the gradients of all ranks, so one rank "
        "would wait forever for the others"
    )
    outcome = outcome_of(Ended(interrupted=True), Evidence.read(tmp_path, 2), 2, 60, None, 2)
    assert outcome.kind == HUNG
    assert outcome.message.startswith("the run was stopped, as it could never finish: the ranks")
    write_rank(tmp_path, 1, run=2, fit={**FIT, "initial_epoch": 1, "epochs": 2}, stages=stages)
    assert mismatched_training(Evidence.read(tmp_path, 2)) is None


class Ended:
    """A RunResult's fields that outcome_of() reads."""

    def __init__(self, **fields):
        self.timed_out = self.interrupted = False
        self.exit_code, self.failed_rank, self.error = 0, None, ""
        self.log_path, self.wall_seconds = Path("/logs/horovodrun.log"), 30.0
        self.__dict__.update(fields)

    @property
    def ok(self):
        return self.exit_code == 0 and not self.timed_out and not self.interrupted

    def status(self):
        return "FAILED"


def test_the_time_limit_without_evidence_of_a_hang_is_no_hang(tmp_path):
    write_rank(tmp_path, 0, fit=FIT, stages=[[1, "started model.fit"], [9, "finished epoch 1"]])
    write_rank(tmp_path, 1, stages=[[1, "started the script"]])
    outcome = outcome_of(
        Ended(timed_out=True, exit_code=None), Evidence.read(tmp_path, 2), 2, 60, None, 1
    )
    assert outcome.kind == UNFINISHED and "hung" not in outcome.message
    assert outcome.message == (
        "the run did not finish within 60 s: rank 0 was training in "
        "model.fit at line 350 (finished epoch 1); rank 1 had reached: "
        "started the script"
    )


def rank_1_crashed(folder, error: str):
    """The outcome of a 2-worker run whose records are in `folder` and whose runner saw rank 1
    fail with `error`."""
    return outcome_of(
        Ended(exit_code=1, failed_rank=1, error=error), Evidence.read(folder, 2), 2, 60, None, 1
    )


def test_a_crash_names_the_rank_its_line_and_error(tmp_path):
    write_rank(tmp_path, 0)
    error = {"type": "ValueError", "message": "bad shape", "line": 120, "code": "x = f(y)"}
    write_rank(tmp_path, 1, error=error)
    outcome = rank_1_crashed(tmp_path, "Traceback...\nValueError: bad shape")
    assert outcome.kind == CRASHED
    assert outcome.message == (
        "rank 1 stopped with an error at line 120 (`x = f(y)`): ValueError: bad shape"
    )
    assert "Traceback" in outcome.error


def test_a_crash_of_every_rank_alike_is_every_ranks(tmp_path):
    """The same error at the same line on both ranks: not 'rank 0' one time and 'rank 1' the
    next, as whichever was caught first."""
    error = {"type": "TypeError", "message": "missing 'model'", "line": 383, "code": "model.fit("}
    write_rank(tmp_path, 0, error=error)
    write_rank(tmp_path, 1, error=error)
    outcome = rank_1_crashed(tmp_path, "Traceback...\nTypeError: missing 'model'")
    assert outcome.message == (
        "every rank stopped with an error at line 383 (`model.fit(...)`): TypeError: missing 'model'"
    )


def test_a_stopped_run_shows_what_it_could_not_tell_in_one_line(tmp_path):
    hung = Outcome(HUNG, "the run hung: ...", "A collective...")
    result = run_result(
        8,
        "f.py",
        hung,
        [
            finding(4, CANT_TELL, "can't tell: x"),
            finding(5, FAILED, "weights differ", "Broadcast."),
            finding(6, CANT_TELL, "can't tell: y"),
        ],
        seconds=20,
        workers=2,
    )
    text = str(result)
    assert not result.passed and result.status == FAILED
    assert text.startswith("[FAIL] Step 8, run for real on 2 workers\n  the run hung: ... (20 s)")
    assert "[??] steps 4, 6: not shown: the run stopped before it showed (no credit)" in text
    assert "[NO] step 5: weights differ" in text and "Hint: Broadcast." in text
    assert "steps 4, 6" in result._repr_html_()
    finished = run_result(
        5,
        "f.py",
        Outcome(FINISHED, ""),
        [finding(4, PASSED, "same"), finding(5, CANT_TELL, "can't tell: z")],
        seconds=9,
        workers=2,
    )
    assert finished.passed and finished.status == CANT_TELL  # nothing wrong seen: it passes
    assert "[??] step 5: can't tell: z" in str(finished)
    assert finished.message == "the script ran on every worker; 1 of 2 hold, 1 can't tell (9 s)"
    data = json.loads(finished.to_json())
    assert data["passed"] is True and data["status"] == CANT_TELL
    assert data["run"]["outcome"] == FINISHED and data["details"][1]["status"] == CANT_TELL
    assert data["details"][0]["title"] == "averaged updates"
    failing = run_result(
        5,
        "f.py",
        Outcome(FINISHED, ""),
        [finding(4, PASSED, "same"), finding(5, FAILED, "differ")],
        seconds=9,
        workers=2,
    )
    assert failing.status == FAILED and "1 of 2 hold, 1 fail (9 s)" in failing.message
    # A step the script kept the run from showing (an exit before model.fit, no checkpoint at
    # all) earns nothing, though the run finished.
    unshown = run_result(
        5,
        "f.py",
        Outcome(FINISHED, ""),
        [
            finding(4, PASSED, "same"),
            not_shown(5, "can't tell: ranks 0 and 1 never reached model.fit"),
        ],
        seconds=9,
        workers=2,
    )
    assert unshown.status == FAILED and not unshown.passed
    assert unshown.message == (
        "the script ran on every worker; 1 of 2 hold, 1 not shown (no credit) (9 s)"
    )


def test_workers_that_never_started_the_probe_are_the_machines_fault(tmp_path):
    """No rank wrote a record (the launcher could not start a worker): the script never ran,
    so nothing of it may be judged: not run (grader.judge_file raises RunUnavailable)."""
    outcome = outcome_of(
        Ended(exit_code=1, error="python: No module named 'workbook'"),
        Evidence.read(tmp_path, 2),
        2,
        60,
        None,
        1,
    )
    assert outcome.kind == NOT_RUN
    assert outcome.message == "the workers never started: python: No module named 'workbook'"


def test_a_crash_names_what_the_failing_library_code_worked_on(tmp_path):
    """The probe's failing_object: the callback the failing Keras frame belonged to, and the
    line that built it (or a class passed where model.fit needs an instance)."""
    write_rank(tmp_path, 0)
    culprit = {"kind": "callback", "class": "CSVLogger", "line": 40, "code": "log = CSVLogger(p)"}
    write_rank(
        tmp_path,
        1,
        error={
            "type": "NotFoundError",
            "message": "p; No such file",
            "line": 90,
            "code": "model.fit(",
            "culprit": culprit,
        },
    )
    outcome = rank_1_crashed(tmp_path, "Traceback...\nNotFoundError")
    assert outcome.message == (
        "rank 1 stopped with an error at line 90 (`model.fit(...)`), in the "
        "callback CSVLogger built at line 40 (`log = CSVLogger(p)`): "
        "NotFoundError: p; No such file"
    )
    assert outcome.culprit == culprit
    result = run_result(3, "f.py", outcome, [], seconds=3, workers=2)
    assert result.run.culprit == culprit
    assert Result.from_dict(json.loads(result.to_json())).run.culprit == culprit


def test_private_log_dirs_for_the_other_ranks():
    argv = ["--epochs", "1", "--log-dir", "/t/logs"]
    assert private_log_dir(argv, 2, rank=0) == argv
    assert private_log_dir(argv, 2, rank=1) == ["--epochs", "1", "--log-dir", "/t/logs-rank1-run2"]
    assert private_log_dir(["--log-dir=/t/l"], 1, rank=3) == ["--log-dir=/t/l-rank3-run1"]


def test_run_step_refuses_steps_without_an_invariant():
    with pytest.raises(ValueError, match=rf"step must be one of {STEPS[0]}\.\.{LAST_STEP}"):
        run_step(LAST_STEP + 1)


def test_the_traceback_starts_at_the_learners_script():
    error = (
        "[1]<stderr>:Traceback (most recent call last):\n"
        '  File "/g/probe.py", line 354, in <module>\n    main()\n'
        '  File "<frozen runpy>", line 88, in _run_code\n'
        '  File "/n/fashion_mnist.py", line 334, in <module>\n    raise E("x")\nE: x'
    )
    assert from_the_script_on(error, "/n/fashion_mnist.py") == (
        '[1]<stderr>:Traceback (most recent call last):\n  File "/n/fashion_mnist.py", line 334, '
        'in <module>\n    raise E("x")\nE: x'
    )
    assert from_the_script_on(error, "/elsewhere.py") == error


def test_a_kept_run_folder_goes_a_day_later(tmp_path):
    """Failed runs keep their folder for the log; a later check removes those over a day old."""
    import os
    import time

    from grader.running.run_check import FOLDER_PREFIX, KEPT_S, _remove_old_runs

    old, new, other = (
        tmp_path / f"{FOLDER_PREFIX}06-old",
        tmp_path / f"{FOLDER_PREFIX}06-new",
        tmp_path / "someone-elses",
    )
    for folder in (old, new, other):
        (folder / "logs").mkdir(parents=True)
    day_ago = time.time() - KEPT_S - 60
    os.utime(old, (day_ago, day_ago))
    os.utime(other, (day_ago, day_ago))
    _remove_old_runs(tmp_path)
    assert not old.exists() and new.exists() and other.exists()


def test_ranks_whose_allreduces_differ_in_op_blame_the_scripts_distributed_optimizer(tmp_path):
    """op=hvd.Sum on the rank that builds its optimizer, Average on the rank whose
    hvd.load_model wrapped it: Horovod says the reduction ops differ, on the loading rank too.
    The culprit is the script's own hvd.DistributedOptimizer(...) call, on whichever rank."""
    from grader.running.probe import error_line

    said = error_line(
        "Mismatched reduction operation: One rank sent reduction op 1, but another rank sent "
        "reduction op 0.\n\t [[{{node DistributedNovoGrad_Allreduce/cond_3/HorovodAllreduce}}]]"
    )
    assert said.startswith("Mismatched reduction operation") and "node" not in said
    assert error_line("one\n two ") == "two" and error_line("") == ""
    error = {"type": "FailedPreconditionError", "message": said, "line": 410, "code": "model.fit("}
    write_rank(tmp_path, 0, run=2, error=error)
    built = {"line": 320, "code": "opt = hvd.DistributedOptimizer("}
    write_rank(tmp_path, 1, run=2, error=error, wrapped_at=built)
    outcome = rank_1_crashed(tmp_path, "Traceback...\nFailedPreconditionError")
    assert outcome.culprit == {
        "kind": "optimizer wrapper",
        "class": "DistributedOptimizer",
        **built,
    }
    assert "in the optimizer wrapper DistributedOptimizer built at line 320" in outcome.message
    # Another error of the graph's allreduce (a rank that died) names no culprit.
    other = {**error, "message": "Horovod has been shut down."}
    write_rank(tmp_path, 0, run=2, error=other)
    write_rank(tmp_path, 1, run=2, error=other, wrapped_at=built)
    assert rank_1_crashed(tmp_path, "Traceback...").culprit is None
