"""The step checker: is step N of the workbook done in the learner's fashion_mnist.py, and if not, why?

In a notebook (which runs in notebooks/, next to the learner's fashion_mnist.py):

    from grader import check_step, check_all
    check_step(5)                       # one step; shows green or red, with a hint and a diff
    check_all()                         # all 12 steps
    check_strict(reference_step=12)     # the whole file equals the solution, up to formatting
    check_bonus("alexnet")              # a bonus exercise (no points; grader/bonus/)
    train_bonus("alexnet")              # ... and a few real training steps of it on 2 workers
    run_step(5)                         # runs the script on 2 workers; checks steps 4..5 for real

In a terminal: python -m grader check FILE [--step N | --all | --bonus NAME] [--json]
[--strict [REFERENCE]], and python -m grader run FILE --step N (grader/live/)

Every check returns a grader.report.Result, the one result vocabulary of the static check, the
run-for-real check, the batch grader and the class report: status PASSED, FAILED or CANT_TELL
("can't tell" counts as done), a message, the line it points at, a hint, and for a real run
its details (one Result per invariant) and its run's evidence. A rule's verdict (a Failure, Note,
Advice or None of grader/verdicts.py) becomes a Result here, in _from_rule.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from grader import budget, judge, reference, strict
from grader.bonus import BONUSES
from grader.bonus import run as bonus_run
from grader.live import run_step
from grader.live.outcome import NOT_RUN
from grader.names import Script
from grader.report import CANT_TELL, FAILED, PASSED, READING, Result, Results
from grader.rules import RULES
from grader.source import FileProblem, parse, read_source
from grader.verdicts import Advice, Failure, Note

DEFAULT_PATH = "fashion_mnist.py"
STEPS = tuple(sorted(RULES))
LAST_STEP = STEPS[-1]
CANT_TELL_SAYS = "done (the grader can't tell for sure: "  # how a rule's Note begins
# Set by the instructor's grading kernel: a JSON file of the student's decided verdicts.
JUDGED_VARIABLE = "WORKBOOK_JUDGED"

__all__ = [
    "check_step",
    "check_all",
    "check_files",
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
    """Checks one step (1-12) of the script at `path`, by reading it (milliseconds).

    run_if_unsure: when the reading can't tell, run the script for real (grader/live/, about
    20 s on 2 workers) and let what it does decide (grader/judge.py). While an instructor
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
        print(f"The reading can't tell for sure ({why}): running your script to decide "
              "(interrupt the kernel to stop it).", flush=True)  # fmt: skip
        return judge.decide(Results([result]), run_step(step, path))[0]
    return result


def judge_file(path=DEFAULT_PATH, *, sandbox=None, timeout: float | None = None,
               work_dir=None) -> Results:
    """Every step of the script at `path`, decided by a run for real where it shows the step
    and by the reading elsewhere (grader/judge.py); each Result says which decided."""
    static = check_all(path)
    if all(result.file_problem for result in static):  # nothing to run: it can't be parsed
        return judge.decide(static, None)
    options = {"timeout": timeout} if timeout else {}
    run = run_step(LAST_STEP, path, quiet=True, sandbox=sandbox, work_dir=work_dir, **options)
    if run.run is not None and run.run.outcome == NOT_RUN and not run.file_problem:
        raise RunUnavailable(run.message)  # this machine's fault, not the script's
    return judge.decide(static, run)


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


def check_files(paths, steps=STEPS) -> dict:
    """Checks many scripts: {path: Results}; a broken file only affects its own results."""
    return {path: _check(path, list(steps)) for path in paths}


def check_strict(path=DEFAULT_PATH, reference_path=None, reference_step=None) -> Result:
    """Does the whole file match the reference, ignoring only comments and formatting?

    The reference is `reference_path`, else the reference script after `reference_step`,
    else the solution.
    """
    if reference_path is None:
        reference_path = reference.reference_path(reference_step or STEPS[-1])
    title = f"Matches {Path(reference_path).name}"
    seconds = budget.PARSE_CPU_SECONDS + budget.STEP_CPU_SECONDS
    try:
        return budget.isolated(_check_strict_here, path, reference_path, cpu_seconds=seconds)
    except budget.Spent as spent:
        return _spent_result(None, path, spent, title)


def _check_strict_here(path, reference_path) -> Result:
    name = Path(reference_path).name
    title = f"Matches {name}"
    try:
        text = read_source(path)
    except FileProblem as problem:
        return _problem_result(None, title, path, problem)
    try:
        reference_text = read_source(reference_path)
        reference_tree = parse(reference_text)
    except FileProblem as problem:
        raise FileProblem(f"reference {problem.message}", unreadable=True) from None
    try:
        with budget.cpu_limit(budget.STEP_CPU_SECONDS, "comparing the file took too long"):
            tree = parse(text)
            if strict.matches(tree, reference_tree):
                return Result(PASSED, title, f"your file matches {name}", path=str(path))
            found = strict.first_difference(tree, reference_tree, text, reference_text) or (1, 1)
    except budget.Spent as spent:
        return _spent_result(None, path, spent, title)
    except FileProblem as problem:
        return _problem_result(None, title, path, problem)
    except RecursionError as error:
        return _problem_result(None, title, path, FileProblem(_too_deep(error).message))
    message, diff = strict.describe_difference(text, reference_text, found, name)
    return Result(
        FAILED,
        title,
        f"your file does not match {name}: {message}",
        hint="Only comments, blank lines and formatting may differ; docstrings count as code.",
        expected_diff=diff,
        line=found[0] or None,
        path=str(path),
    )


def check_bonus(name: str, path=DEFAULT_PATH) -> Result:
    """Checks a bonus exercise (see grader/bonus/) in the script at `path`; no points."""
    if name not in BONUSES:
        raise ValueError(f"bonus must be one of {sorted(BONUSES)}, not {name!r}")
    seconds = budget.PARSE_CPU_SECONDS + budget.STEP_CPU_SECONDS
    try:
        return budget.isolated(_check_bonus_here, name, path, cpu_seconds=seconds)
    except budget.Spent as spent:
        return _spent_result(None, path, spent, BONUSES[name].TITLE)


def _check_bonus_here(name: str, path) -> Result:
    bonus = BONUSES[name]
    try:
        script = Script.from_text(read_source(path))
    except FileProblem as problem:
        return _problem_result(None, bonus.TITLE, path, problem)
    try:
        with budget.cpu_limit(budget.STEP_CPU_SECONDS, "checking the bonus took too long"):
            failure = bonus.check(script)
    except budget.Spent as spent:
        return _spent_result(None, path, spent, bonus.TITLE)
    except RecursionError as error:
        failure = _too_deep(error)
    except Exception as error:  # a grader bug must read as one, not as the learner's mistake
        failure = Failure(f"the grader could not check this ({type(error).__name__}: {error})")
    result = _from_rule(failure, None, bonus.TITLE, path, bonus.HINT)
    if not result.passed:
        result.expected_diff = reference.bonus_diff(name)
    return result


def train_bonus(name: str, path=DEFAULT_PATH, **options) -> Result:
    """Runs the script with the bonus for a few steps on 2 workers (grader/bonus/run.py)."""
    return bonus_run.train_bonus(name, path, check_bonus(name, path), **options)


def _check(path, steps: list) -> Results:
    """The steps' results, computed within the checker's budget (grader/budget.py)."""
    seconds = budget.PARSE_CPU_SECONDS + budget.STEP_CPU_SECONDS * len(steps)
    try:
        return budget.isolated(_check_here, path, steps, cpu_seconds=seconds)
    except budget.Spent as spent:
        return Results(_spent_result(step, path, spent) for step in steps)


def _check_here(path, steps: list) -> Results:
    try:
        with budget.cpu_limit(budget.PARSE_CPU_SECONDS, "reading the file took too long"):
            script = Script.from_text(read_source(path))
    except FileProblem as problem:
        return Results(
            _problem_result(step, reference.title(step), path, problem) for step in steps
        )
    except budget.Spent as spent:
        return Results(_spent_result(step, path, spent) for step in steps)
    return Results(_run_rule(script, step, path) for step in steps)


def _run_rule(script: Script, step: int, path) -> Result:
    rule = RULES[step]
    title = reference.title(step)
    try:
        with budget.cpu_limit(budget.STEP_CPU_SECONDS, "checking this step took too long"):
            failure = rule.check(script)
    except budget.Spent as spent:
        return _spent_result(step, path, spent)
    except RecursionError as error:
        failure = _too_deep(error)
    except MemoryError:
        return _spent_result(step, path, budget.Spent("it needed too much memory"))
    except Exception as error:  # a grader bug must not hide the other steps' results
        failure = Failure(f"the grader could not check this step ({type(error).__name__}: {error})")
    result = _from_rule(failure, step, title, path, rule.HINT)
    if not result.passed:
        result.expected_diff = reference.expected_diff(step)
    return result


def _too_deep(error: RecursionError) -> Failure:
    line = budget.line_of(error.__traceback__)
    where = f" (line {line})" if line else ""
    return Failure(f"the file is too deeply nested to check{where}", line)


def _spent_result(step, path, spent: budget.Spent, title: str = "") -> Result:
    """A check that ran out of budget: failed, saying where, never a pass."""
    subject = f"step {step}" if step is not None else "the file"
    return Result(
        FAILED,
        reference.title(step) if step is not None else title,
        spent.message(subject[0].upper() + subject[1:]),
        hint=(f"Look at line {spent.line}: " if spent.line else "")
        + "simplify what it computes (no huge numbers, ranges or nesting), then check again.",
        step=step,
        line=spent.line,
        path=str(path),
    )


def _from_rule(failure, step, title: str, path, hint: str) -> Result:
    """A rule's verdict (grader/verdicts.py) as a Result: None is PASSED; an Advice (done, by
    another route that works) PASSED with its note; a Note CANT_TELL, saying what the grader
    couldn't tell; a Failure FAILED, with `hint` unless it has its own."""
    if failure is None:
        return Result(PASSED, title, "done", step=step, path=str(path))
    if isinstance(failure, Note):
        if isinstance(failure, Advice):
            status, message = PASSED, f"done (note: {failure.message})"
        else:
            status, message = CANT_TELL, f"{CANT_TELL_SAYS}{failure.message})"
        return Result(status, title, message, step=step, path=str(path))
    return Result(
        FAILED,
        title,
        failure.message,
        step=step,
        hint=failure.hint or hint,
        line=failure.line,
        path=str(path),
    )


def _problem_result(step, title: str, path, problem: FileProblem) -> Result:
    hint = "Fix this first; then every step can be checked."
    if problem.line:
        hint = f"Look at line {problem.line} and the line before it. " + hint
    return Result(
        FAILED,
        title,
        problem.message,
        step=step,
        hint=hint,
        line=problem.line,
        path=str(path),
        file_problem=True,
        unreadable=problem.unreadable,
    )
