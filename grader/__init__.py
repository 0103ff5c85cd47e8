"""The step checker: is step N of the workbook done in the learner's fashion_mnist.py, and if not, why?

In a notebook (which runs in notebooks/, next to the learner's fashion_mnist.py):

    from grader import check_step, check_all
    check_step(5)                       # one step; shows green or red, with a hint and a diff
    check_all()                         # every step (workbook.facts.STEPS)
    check_strict()                      # the whole file equals the solution, up to formatting
    check_bonus("alexnet")              # a bonus exercise (no points; grader/bonus/)
    train_bonus("alexnet")              # ... and a few real training steps of it on 2 workers
    run_step(5)                         # runs the script on 2 workers; checks steps 4..5 for real

In a terminal: python -m grader check FILE [--step N | --all | --bonus NAME] [--json]
[--strict [REFERENCE]], and python -m grader run FILE --step N (grader/running/)

Every check returns a grader.report.Result, the one result vocabulary of the static check, the
run-for-real check, the batch grader and the class report: status PASSED, FAILED or CANT_TELL
("can't tell" counts as done), a message, the line it points at, a hint, and for a real run
its details (one Result per invariant) and its run's evidence. A rule's verdict (a Failure, Note,
Advice or None of grader/reading/verdicts.py) becomes a Result in grader/reading/guard.py, the one way every
static check runs (within its budget; a checker error a verdict, never a crash).
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import partial
from pathlib import Path

from grader import decision, reference, reference_swap
from grader.bonus import BONUSES, trial_run
from grader.reading import guard, strict
from grader.reading.guard import CANT_TELL_SAYS, Check
from grader.reading.names import Script
from grader.reading.rules import RULES
from grader.reading.source import FileProblem, parse, read_source
from grader.report import CANT_TELL, FAILED, PASSED, READING, Result, Results
from grader.running import run_step
from grader.running.outcome import NOT_RUN
from grader.running.run_check import TIMEOUT_S as RUN_TIMEOUT_S
from workbook import class_progress, prose
from workbook.facts import LAST_STEP, STEPS

DEFAULT_PATH = "fashion_mnist.py"
STRICT_HINT = "Only comments, blank lines and formatting may differ; docstrings count as code."
# Set by the instructor's grading kernel: a JSON file of the student's decided verdicts.
JUDGED_VARIABLE = "WORKBOOK_JUDGED"
# The least time worth a second run after a crash (the reference's two launches take about 20 s
# of a quiet 2-core machine's time; grader/README.md's run profile).
MIN_SWAP_RUN_S = 30

__all__ = [
    "check_step",
    "check_all",
    "check_strict",
    "judge_file",
    "check_bonus",
    "train_bonus",
    "run_step",
    "Result",
    "Results",
    "PASSED",
    "FAILED",
    "CANT_TELL",
]


def check_step(step: int, path=DEFAULT_PATH, *, run_if_unsure: bool = False) -> Result:
    """Checks one step (one of STEPS) of the script at `path`, by reading it (milliseconds).

    run_if_unsure: when the reading can't tell, run the script for real (grader/running/, about
    20 s on 2 workers) and let what it does decide (grader/decision.py). While an instructor
    grades, the verdict is the one decided beforehand from a sandboxed run (JUDGED_VARIABLE).
    """
    if step not in RULES:
        raise ValueError(f"step must be one of {STEPS[0]}..{STEPS[-1]}, not {step!r}")
    judged = os.environ.get(JUDGED_VARIABLE)
    if judged:
        return judged_result(judged, step, path)
    result = _check(path, [step])[0]
    if run_if_unsure and result.status == CANT_TELL and not result.file_problem:
        why = result.message.removeprefix(CANT_TELL_SAYS).removesuffix(")")
        # Wrapped between words, its code as code (a notebook's plain output breaks anywhere).
        prose.show(
            f"The reading can't tell for sure: {why}. Running your script to decide "
            "(interrupt the kernel to stop it)."
        )
        result = decision.decide(Results([result]), run_step(step, path))[0]
    class_progress.note(step, result.status)  # on a workshop hub: the instructor's class view
    return result


def judge_file(
    path=DEFAULT_PATH, *, sandbox=None, timeout: float | None = None, work_dir=None
) -> Results:
    """Every step of the script at `path`, decided by a run for real where it shows the step
    and by the reading elsewhere (grader/decision.py); each Result says which decided."""
    static = check_all(path)
    if all(result.file_problem for result in static):  # nothing to run: it can't be parsed
        return decision.decide(static, None)
    options = {"timeout": timeout} if timeout else {}
    run = run_step(LAST_STEP, path, quiet=True, sandbox=sandbox, work_dir=work_dir, **options)
    if run.run is not None and run.run.outcome == NOT_RUN and not run.file_problem:
        raise RunUnavailable(run.message)  # this machine's fault, not the script's
    decided = decision.decide(static, run)
    again = _run_swapped(path, run, sandbox=sandbox, work_dir=work_dir, **options)
    if again is not None:
        decided = decision.after_the_swap(decided, static, run, *again)
        run.run.swapped = again[0].words()
    decided.run = run.run  # how the run went: re-runs, code not the script's (grader.report.Run)
    return decided


def _run_swapped(path, run: Result, **run_options):
    """(the swap, its run) when `run` crashed or hung on the code of one step and that step's
    line could be swapped for the reference's (grader/reference_swap.py); else None."""
    blamed = decision.blamed_steps(run, {detail.step: detail for detail in run.details})
    if len(blamed) != 1 or run.run.foreign:
        return None
    try:
        source = read_source(path)
    except FileProblem:
        return None
    lines, step = reference_swap.failing_lines(source, run.run), next(iter(blamed))
    swap = (
        reference_swap.swapped(source, lines, step)
        or next(filter(None, (reference_swap.call_swapped(source, n, step) for n in lines)), None)
        or reference_swap.swapped(source, reference_swap.feeding_lines(source, run.run), step)
        or reference_swap.inserted(source, run.run.line, step)
    )
    # One time limit for the whole judgement: the second run gets what the first left.
    left = run_options.pop("timeout", RUN_TIMEOUT_S) - run.run.counted_seconds
    if swap is None or left < MIN_SWAP_RUN_S:
        return None
    run_options["timeout"] = left
    with tempfile.TemporaryDirectory(prefix="swapped-", dir=run_options.get("work_dir")) as folder:
        os.chmod(folder, 0o755)  # the sandbox's account reads the script
        script = Path(folder) / Path(path).name
        script.write_text(swap.source, encoding="utf-8")
        return swap, run_step(LAST_STEP, script, quiet=True, **run_options)


class RunUnavailable(RuntimeError):
    """A run could not start here (no horovodrun, no sandbox...): no verdict may rest on it."""


def judged_result(judged_file, step: int, path) -> Result:
    """Step `step`'s verdict from a file of decided Results (judge_file(), saved as JSON by
    the instructor's grading); the reading's verdict, saying so, when the file has none."""
    try:
        data = json.loads(Path(judged_file).read_text(encoding="utf-8"))
        items = data["results"] if isinstance(data, dict) else data
        found = [Result.from_dict(item) for item in items if item.get("step") == step]
    except (OSError, ValueError, TypeError) as error:
        found, why = [], f"its decided verdicts could not be read ({type(error).__name__})"
    else:
        why = "no decided verdict of this step was made"
    if found:
        return found[0]
    result = _check(path, [step])[0]
    result.decided_by = READING
    result.message = f"{result.message} (by reading only: {why})"
    return result


def check_all(path=DEFAULT_PATH, steps=STEPS) -> Results:
    """Checks every step (or `steps`) of the script at `path`."""
    return _check(path, list(steps))


def check_strict(path=DEFAULT_PATH, reference_path=None, reference_step=None) -> Result:
    """Does the whole file match the reference, ignoring only comments and formatting?

    The reference is `reference_path`, else the reference script after `reference_step`,
    else the solution.
    """
    if reference_path is None:
        reference_path = reference.reference_path(reference_step or LAST_STEP)
    name = Path(reference_path).name
    try:
        reference_text = read_source(reference_path)
        reference_tree = parse(reference_text)
    except FileProblem as problem:
        raise FileProblem(f"reference {problem.message}", unreadable=True) from None

    def compare(script: Script) -> Result:
        found = None
        if not strict.matches(script.tree, reference_tree):
            found = strict.first_difference(
                script.tree, reference_tree, script.text, reference_text
            ) or (1, 1)
        return _strict_result(found, path, script.text, reference_text, name)

    check = Check(f"Matches {name}", compare, STRICT_HINT, doing="comparing the file")
    return guard.run_checks(path, [check])[0]


def _strict_result(found, path, text: str, reference_text: str, name: str) -> Result:
    """Strict mode's verdict: the file matches (`found` None), or the first lines that differ."""
    if found is None:
        return Result(PASSED, f"Matches {name}", f"your file matches {name}", path=str(path))
    message, diff = strict.describe_difference(text, reference_text, found, name)
    return Result(
        FAILED,
        f"Matches {name}",
        f"your file does not match {name}: {message}",
        hint=STRICT_HINT,
        expected_diff=diff,
        line=found[0] or None,
        path=str(path),
    )


def check_bonus(name: str, path=DEFAULT_PATH) -> Result:
    """Checks a bonus exercise (see grader/bonus/) in the script at `path`; no points."""
    if name not in BONUSES:
        raise ValueError(f"bonus must be one of {sorted(BONUSES)}, not {name!r}")
    bonus = BONUSES[name]
    check = Check(
        bonus.TITLE,
        bonus.check,
        bonus.HINT,
        doing="checking the bonus",
        expected_diff=partial(reference.bonus_diff, name),
    )
    return guard.run_checks(path, [check])[0]


def train_bonus(name: str, path=DEFAULT_PATH, **options) -> Result:
    """Runs the script with the bonus for a few steps on 2 workers (grader/bonus/trial_run.py)."""
    return trial_run.train_bonus(name, path, check_bonus(name, path), **options)


def _check(path, steps: list) -> Results:
    """The steps' results (grader/reading/guard.py: within the budget, a checker error a verdict)."""
    return guard.run_checks(path, [guard.step_check(step) for step in steps])
