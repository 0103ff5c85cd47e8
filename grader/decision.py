"""Each step's verdict from both checks: what the run showed decides, the reading advises.

    decide(static_results, run_result) -> Results

The static check (grader/reading/rules/) reads the script in milliseconds and can explain why; the run
for real (grader/running/) shows what the script does. A step counts only when a run shows it.
Per step:

1. The run crashed or hung on the step's code: the step whose lines the failing path goes
   through (grader.running.outcome's culprit: the callback or optimizer the failing library frame
   belongs to, and the script's line that built it; else the script's innermost line, by the
   names it uses and by how alike it is to the step's lines in the reference chain), and the
   step whose lines alone name what the error quotes ('NovoGrad', 'tfa'); also when the run had
   shown that step to hold before it broke. FAILED, decided by the run.
2. The run showed the step's invariant (PASSED or FAILED): the run decides. Where a run on this
   machine can't show part of a step (READING_ONLY), a failed reading of that part overrules a
   passed run, and the message says so.
3. The script kept the run from showing the step (it crashed, hung, exited or stopped before,
   or never did what the step is about: the finding is `withheld`; any finding that can't
   tell of a run that crashed, hung or was stopped): not credited. FAILED, decided by the run;
   the message says what stopped the run, where, and what it did show.
4. Otherwise (no run, or a run that can't see what the script did) the reading decides when
   it is sure (PASSED or FAILED).
5. When neither can tell, the step is CANT_TELL, decided by NEITHER: it counts as done (the
   documented default, instructor/README.md), and the class report lists it with both pieces
   of evidence for the instructor.

Every decided Result names who decided in `decided_by`, which the learner's check cell and
the student's feedback show.
"""

from __future__ import annotations

import builtins
import difflib
import re
from dataclasses import replace

from grader import data_flow, reference
from grader.reading.source import FileProblem, read_source
from grader.report import CANT_TELL, FAILED, NEITHER, PASSED, READING, RUN, Result, Results
from grader.running.invariants import CANT_SHOW, RESUME_STEP
from grader.running.outcome import CRASHED, HUNG, NOT_RUN, UNFINISHED

# What a run on this machine can't show, per step (its invariant's CANT_SHOW); the reading
# decides that part.
READING_ONLY = CANT_SHOW
SAME_LINE = 0.6  # how alike (difflib's ratio) a crash's line and a step's line must be
ENDED_EARLY = (CRASHED, HUNG)  # how a run ended that a step's code can be blamed for
STOPPED = (CRASHED, HUNG, UNFINISHED)  # a run the script stopped: what it did not show, it can't


def decide(static: Results, run: Result | None) -> Results:
    """The decided verdict of each step of `static`, given the run's Result (or None)."""
    findings = {detail.step: detail for detail in (run.details if run else [])}
    blamed = blamed_steps(run, findings) if run is not None else set()
    return Results(
        _decide_step(result, findings.get(result.step), run, blamed) for result in static
    )


def _decide_step(static: Result, found: Result | None, run: Result | None, blamed: set) -> Result:
    if static.step in blamed and (found is None or found.status != FAILED):
        return replace(
            static,
            status=FAILED,
            decided_by=RUN,
            message=f"the script did not get through this step on {run.run.workers} "
            f"workers: {run.message}",
            # The run has been made: what helps now is the step's own code beside the error.
            hint=static.hint
            or "The error above is your script's, on this step's code: compare that code with "
            "the expected change.",
            expected_diff=static.expected_diff or reference.expected_diff(static.step),
            line=run.run.line,
        )
    if found is not None and found.status != CANT_TELL:
        if found.status == PASSED and static.status == FAILED and static.step in READING_ONLY:
            return replace(
                static,
                decided_by=READING,
                message=(
                    f"{static.message} (the run showed {found.message}; it can't show "
                    f"{READING_ONLY[static.step]}: the reading decides that)"
                ),
            )
        return replace(
            static,
            status=found.status,
            message=found.message,
            hint=found.hint or static.hint if found.status == FAILED else "",
            expected_diff=static.expected_diff if found.status == FAILED else "",
            line=static.line if found.status == FAILED else None,
            decided_by=RUN,
        )
    if found is not None and (found.withheld or run.run.outcome in STOPPED):
        return replace(
            static,
            status=FAILED,
            decided_by=RUN,
            message=not_credited(found, run),
            hint=static.hint or "Run the script on 2 workers and read what stopped it.",
            expected_diff=static.expected_diff or reference.expected_diff(static.step),
            line=static.line if run.run.finished else run.run.line,
        )
    unseen = _why_unseen(found, run)
    if static.status != CANT_TELL:
        return replace(
            static,
            decided_by=READING,
            message=f"{static.message} (decided by reading the script: {unseen})",
        )
    return replace(
        static,
        decided_by=NEITHER,
        message=f"neither check could decide; counted as done for now. The run: "
        f"{unseen}. The reading: {static.message}",
    )


def after_the_swap(decided: Results, static: Results, first: Result, swap, second: Result):
    """`decided` (from `first`, a run that crashed on step swap.step's line) with the steps that
    run did not show decided by `second`, the run of the script with that line swapped for the
    reference's (grader/reference_swap.py), saying so. The blamed step keeps its verdict; so
    does every step the first run showed, and the resume's step when the first run stopped in
    the resumed launch: whoever's line broke it, the script could not resume. Unchanged when
    the swap did not take the crash away."""
    stopped = second.run is None or second.run.outcome in ENDED_EARLY + (NOT_RUN,)
    if stopped and (second.run is None or second.run.line == swap.failing_line(first.run.line)):
        return decided
    shown = {d.step for d in first.details if d.status != CANT_TELL and not d.withheld}
    shown |= {RESUME_STEP} if first.run.resumed else set()
    # Only what the second run showed: a step it did not show either is not "shown by" it.
    showed = {d.step for d in second.details if d.status != CANT_TELL and not d.withheld}
    again = {result.step: result for result in decide(static, second) if result.step in showed}
    return Results(
        replace(
            again[result.step],
            message=f"{again[result.step].message} (shown by {swap.words()}: the first run "
            f"stopped at step {swap.step}'s mistake)",
        )
        if result.step != swap.step
        and result.step not in shown
        and again.get(result.step) is not None
        and again[result.step].decided_by == RUN
        else result
        for result in decided
    )


CANT_TELL_SAYS = "can't tell: "  # how a finding that can't tell begins (grader/running/invariants/)


def not_credited(found: Result, run: Result) -> str:
    """Why a step the run did not show earns nothing: what stopped the run and where (when it
    ended early), what it lacked for this step, and what it did show."""
    lacked = found.message.removeprefix(CANT_TELL_SAYS)
    stopped = "" if run.run.finished else f"{run.message}; so "
    held = [detail.step for detail in run.details if detail.status == PASSED]
    showed = (
        f"it showed step{'s' if len(held) > 1 else ''} {_steps_text(held)} to hold"
        if held
        else "it showed no step to hold"
    )
    return f"not credited, as the run did not show this step: {stopped}{lacked} ({showed})"


def _steps_text(steps: list) -> str:
    names = [str(step) for step in steps]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _why_unseen(found: Result | None, run: Result | None) -> str:
    if run is None:
        return "the script was not run"
    if found is not None:
        return found.message
    return f"the run did not show it ({run.message})"


def blamed_steps(run: Result, findings: dict) -> set:
    """The steps a crash or a hang is blamed on, none when the run finished or timed out: the
    step whose code is on the failing path (a step the run had shown to hold too: a NovoGrad
    import only the fresh start has breaks the resume), and the step that alone names what the
    error quotes. Never a step only because the run did not show it: such a step earns nothing
    anyway (not_credited says why)."""
    if run.run is None or run.run.outcome not in ENDED_EARLY:
        return set()
    steps = sorted(findings)
    on_path = step_on_path(run.run, steps)
    if on_path is None:
        on_path = step_of_fed_name(_source(run.path), run.run.line, steps)
    if on_path is not None and normalized_code(run.run.code) in added_lines(on_path):
        # The failing line is the reference's own: the mistake is upstream, in the earliest
        # step whose invariant the run saw fail (Horovod used before hvd.init(): step 2's
        # pinning line raises, and step 1 is what is missing).
        on_path = next((s for s in steps if s < on_path and findings[s].status == FAILED), on_path)
    return {
        step
        for step in (on_path, step_of_quoted_name(run.run.exception, steps))
        if step is not None
    }


def step_on_path(run, steps: list) -> int | None:
    """The step among `steps` whose code the failing path goes through: the callback or
    optimizer the failing library frame worked on (by its class, else the line that built it),
    else the script's innermost line (by likeness to a step's lines, else by the one step that
    assigns a name it uses)."""
    culprit = run.culprit or {}
    if culprit.get("class"):
        by_class = step_of_name(culprit["class"], steps)
        if by_class is None and culprit["class"] in WRITERS:
            by_class = step_of_name(WRITERS[0], steps)
        if by_class is None and culprit.get("code"):
            by_class = step_of_line(culprit["code"], steps)
        if by_class is not None:
            return by_class
    return step_of_line(run.code, steps) or step_of_assigned_name(run.code, steps)


# Keras's callbacks that write files, all of them the one writer's (step 9's) to place;
# the first is the one the reference chain names.
WRITERS = ("ModelCheckpoint", "TensorBoard", "CSVLogger", "BackupAndRestore")
# What an error quotes that names a kind of value, not code: "'<' not supported between
# instances of 'int' and 'function'".
VALUE_KINDS = frozenset(dir(builtins)) | {"function", "method", "NoneType", "module"}


def step_of_name(name: str, steps: list) -> int | None:
    """The one step among `steps` whose added reference lines use `name`, if exactly one does."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    using = [step for step in steps if any(word.search(line) for line in added_lines(step))]
    return using[0] if len(using) == 1 else None


def step_of_assigned_name(code: str, steps: list) -> int | None:
    """The one step among `steps` whose added reference lines assign a name `code` uses
    (`resume_from_epoch = ...`: a print of it fails for the resume's fault), if exactly one."""
    used = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", normalized_code(code)))
    assigning = {
        step for step in steps for line in added_lines(step) if _assigned_name(line) in used
    }
    return next(iter(assigning)) if len(assigning) == 1 else None


def step_of_fed_name(source: str, line: int | None, steps: list) -> int | None:
    """The one step among `steps` whose added reference lines assign a name that fed the
    failing statement at `line` one assignment back, where the script assigns it otherwise
    than the reference chain does (`json.dumps(result)` of a dict holding `resume_from_epoch`, left a
    tensor by the script's own version of step 8's line), if exactly one does. A name the
    script assigns as the reference does is no suspect: `model = hvd.load_model(...)` written
    as step 8's does not make every crash on `model` step 8's."""
    fed = data_flow.feeding(source, line)
    script_lines = source.splitlines()
    as_written = {
        normalized_code(code) for step in (0, *steps) for code in reference.script_lines(step)
    }
    own = {
        name
        for name, lines in fed.items()
        if any(normalized_code(script_lines[n - 1]) not in as_written for n in lines)
    }
    brought = {}  # name: the first step that assigns it (a later step's line only changes it)
    for step in steps:
        for code in added_lines(step):
            if (name := _assigned_name(code)) in own:
                brought.setdefault(name, step)
    assigning = set(brought.values())
    return next(iter(assigning)) if len(assigning) == 1 else None


def _assigned_name(code: str) -> str | None:
    """The name a normalized line assigns (`name = ...`), if it is a plain assignment."""
    match = re.match(r"([A-Za-z_][A-Za-z0-9_]*) =[^=]", code)
    return match.group(1) if match else None


def _source(path) -> str:
    """The script's text, read as every check reads a learner's file (read_source: a regular
    file of bounded size), or "" when there is none to read."""
    try:
        return read_source(path) if path else ""
    except FileProblem:
        return ""


def step_of_quoted_name(exception: str, steps: list) -> int | None:
    """The one step among `steps` whose added reference lines use a name the exception's first
    clause quotes ("ValueError: Unknown optimizer: 'NovoGrad'. Please ensure...", "local
    variable 'tfa'"), if exactly one does. Not the rest: "Allowed kwargs are {'lr', ...}"
    lists what the failing call could have had; nor the kinds of values it names ('int')."""
    first = re.split(r"\.\s|\{|\[", exception or "", maxsplit=1)[0]
    for name in re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", first):
        if name in VALUE_KINDS:
            continue
        step = step_of_name(name, steps)
        if step is not None:
            return step
    return None


def step_of_line(code: str, steps: list) -> int | None:
    """The step among `steps` whose lines in the reference chain `code` is most like, if any
    is alike enough."""
    code = normalized_code(code)
    if not code:
        return None
    # A traceback shows a statement's first line only: `model = hvd.load_model(` is as much
    # the start of step 8's one-line call as of step 12's call over several lines.
    cut = code.endswith(("(", "[", "{", ","))
    best, best_ratio = None, SAME_LINE
    for step in steps:  # on a tie the earlier step: the one that brought the line
        for line in added_lines(step):
            ratio = difflib.SequenceMatcher(None, code, line[: len(code)] if cut else line).ratio()
            if ratio > best_ratio or (best is None and ratio == best_ratio):
                best, best_ratio = step, ratio
    return best


def reference_lines(step: int) -> list[str]:
    """The code lines step `step` adds in the reference chain, as written (no newline)."""
    return [
        line[1:].rstrip("\n")
        for line in reference.expected_diff(step).splitlines()
        if line.startswith("+") and not line.startswith("+++")
        if normalized_code(line[1:]) and not normalized_code(line[1:]).startswith("#")
    ]


def added_lines(step: int) -> list:
    """The code lines step `step` adds in the reference chain, normalized."""
    return [normalized_code(line) for line in reference_lines(step)]


def normalized_code(code: str) -> str:
    """`code` with its whitespace runs made one space and its double quotes single."""
    return re.sub(r"\s+", " ", (code or "").replace('"', "'")).strip()
