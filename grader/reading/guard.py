"""The one way a static check runs: within its budget, a checker error a verdict, never a crash.

`run_checks(path, checks)` reads the script once and runs each `Check` on it; every static
verdict comes from here: check_step, check_all, check_strict and check_bonus (grader/__init__.py),
the batch grader (grader/batch.py, through check_all), and the run's pre-check
(`reading_problem`, grader/running/run_check.py). What it guards against:

- the budget (grader/reading/budget.py): the whole reading in a forked child with memory and time
  limits, the parse and each check within their CPU seconds; a check that runs out fails with
  "... could not be checked", naming the line it stopped at, never a pass;
- a file that can't be read or parsed: every check fails with the file's problem;
- a checker error: deep recursion is "too deeply nested to check", running out of memory a
  budget spent, any other exception "the grader could not check this", so that a grader bug
  reads as one and never hides the other checks' results.

A check returns a rule's verdict (grader/reading/verdicts.py: a Failure, a Note, an Advice, or None
when done), which becomes a grader.report.Result here, or a Result of its own (strict mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from grader import reference
from grader.reading import budget
from grader.reading.names import Script
from grader.reading.rules import RULES
from grader.reading.source import FileProblem, read_source
from grader.reading.verdicts import Advice, Failure, Note
from grader.report import CANT_TELL, FAILED, PASSED, Result, Results

CANT_TELL_SAYS = "done (the grader can't tell for sure: "  # how a rule's Note begins


@dataclass(frozen=True)
class Check:
    """One check of a script, with what its verdict needs to be worded."""

    title: str
    verdict: Callable  # (Script) -> Failure | Note | None, or a Result
    hint: str = ""  # a Failure's hint, unless it has its own
    step: int | None = None  # None: a check of the whole file (strict, a bonus)
    doing: str = "checking this step"  # what a CPU overrun says the checker was doing
    expected_diff: Callable | None = None  # () -> the diff shown when the check does not pass


def step_check(step: int) -> Check:
    """Step `step`'s rule (grader/reading/rules/) as a Check."""
    rule = RULES[step]
    return Check(
        reference.title(step),
        rule.check,
        rule.HINT,
        step,
        expected_diff=partial(reference.expected_diff, step),
    )


def run_checks(path, checks) -> Results:
    """Each check's Result on the script at `path`, within the checker's budget."""
    checks = list(checks)
    seconds = budget.PARSE_CPU_SECONDS + budget.STEP_CPU_SECONDS * len(checks)
    try:
        return budget.isolated(_run_here, path, checks, cpu_seconds=seconds)
    except budget.Spent as spent:
        return Results(_spent_result(check, path, spent) for check in checks)


def reading_problem(path) -> Result | None:
    """Why the script at `path` can't be checked at all (a FAILED Result with file_problem:
    missing, unreadable, a syntax error...), or None when it reads and parses."""
    (result,) = run_checks(path, [Check("Reads the file", lambda script: None)])
    return result if result.file_problem else None


def _run_here(path, checks: list) -> Results:
    try:
        with budget.cpu_limit(budget.PARSE_CPU_SECONDS, "reading the file took too long"):
            script = Script.from_text(read_source(path))
    except FileProblem as problem:
        return Results(_problem_result(check, path, problem) for check in checks)
    except budget.Spent as spent:
        return Results(_spent_result(check, path, spent) for check in checks)
    return Results(_run_one(check, script, path) for check in checks)


def _run_one(check: Check, script: Script, path) -> Result:
    try:
        with budget.cpu_limit(budget.STEP_CPU_SECONDS, f"{check.doing} took too long"):
            verdict = check.verdict(script)
    except budget.Spent as spent:
        return _spent_result(check, path, spent)
    except RecursionError as error:
        verdict = _too_deep(error)
    except MemoryError:
        return _spent_result(check, path, budget.Spent("it needed too much memory"))
    except Exception as error:  # a grader bug must read as one, and not hide the other results
        this = "this step" if check.step is not None else "this"
        verdict = Failure(f"the grader could not check {this} ({type(error).__name__}: {error})")
    if isinstance(verdict, Result):
        return verdict
    result = _from_verdict(verdict, check, path)
    if not result.passed and check.expected_diff is not None:
        result.expected_diff = check.expected_diff()
    return result


def _too_deep(error: RecursionError) -> Failure:
    line = budget.line_of(error.__traceback__)
    where = f" (line {line})" if line else ""
    return Failure(f"the file is too deeply nested to check{where}", line)


def _spent_result(check: Check, path, spent: budget.Spent) -> Result:
    """A check that ran out of budget: failed, saying where, never a pass."""
    subject = f"Step {check.step}" if check.step is not None else "The file"
    return Result(
        FAILED,
        check.title,
        spent.message(subject),
        hint=(f"Look at line {spent.line}: " if spent.line else "")
        + "simplify what it computes (no huge numbers, ranges or nesting), then check again.",
        step=check.step,
        line=spent.line,
        path=str(path),
    )


def _from_verdict(verdict, check: Check, path) -> Result:
    """A rule's verdict (grader/reading/verdicts.py) as a Result: None is PASSED; an Advice (done, by
    another route that works) PASSED with its note; a Note CANT_TELL, saying what the grader
    couldn't tell; a Failure FAILED, with the check's hint unless it has its own."""
    step, title = check.step, check.title
    if verdict is None:
        return Result(PASSED, title, "done", step=step, path=str(path))
    if isinstance(verdict, Note):
        if isinstance(verdict, Advice):
            status, message = PASSED, f"done (note: {verdict.message})"
        else:
            status, message = CANT_TELL, f"{CANT_TELL_SAYS}{verdict.message})"
        return Result(status, title, message, step=step, path=str(path))
    return Result(
        FAILED,
        title,
        verdict.message,
        step=step,
        hint=verdict.hint or check.hint,
        line=verdict.line,
        path=str(path),
    )


def _problem_result(check: Check, path, problem: FileProblem) -> Result:
    hint = "Fix this first; then every step can be checked."
    if problem.line:
        hint = f"Look at line {problem.line} and the line before it. " + hint
    return Result(
        FAILED,
        check.title,
        problem.message,
        step=check.step,
        hint=hint,
        line=problem.line,
        path=str(path),
        file_problem=True,
        unreadable=problem.unreadable,
    )
