"""The run_distributed notebook's verdict at a glance: a short line per comparison, then the
detail folded.

    glance(one_worker, yours, baseline)      what the run_distributed notebook's verdict cell
                                             shows

Each line says how much faster or slower the learner's workers trained than one comparison run,
and the one part of the time that made it, all in the numbers of their runs
(workbook.run_times', the same as the table's). Below, folded (HTML <details>), the full
verdict of workbook.verdict_text.verdict() for each comparison. JupyterLab shows the HTML, which
wraps at word boundaries; as plain text (a terminal, nbconvert) every line is wrapped at word
boundaries to WIDTH columns, never in the middle of a word.
"""

from __future__ import annotations

import html
import textwrap

from workbook.prose import WIDTH, code_html, paragraph_html, plural
from workbook.run_times import (
    RunTimes,
    first_epoch_load,
    fit_end_wait,
    load_in,
    speed_up,
    split_training,
)
from workbook.verdict_text import fairness, kind, verdict

# Seconds under which a part's difference is not the reason for a verdict.
NOT_A_REASON_S = 2.0


def _s(seconds: float) -> str:
    return f"{seconds:.0f} s" if abs(seconds) < 120 else f"{seconds / 60:.1f} min"


def reason(reference: RunTimes, run: RunTimes) -> str:
    """The one part of the training time that made the difference between the two runs, with
    its numbers ("" when the runs lack step times)."""
    epochs = max(reference.epochs_trained, run.epochs_trained)
    mine, theirs = split_training(run, epochs), split_training(reference, epochs)
    if mine is None or theirs is None:
        return ""
    steps = mine["steps"] - theirs["steps"]
    outside = (mine["between"] + mine["extra"]) - (theirs["between"] + theirs["extra"])
    more = lambda seconds: f"{_s(abs(seconds))} {'less' if seconds < 0 else 'more'}"  # noqa: E731
    if kind(speed_up(reference, run)) == "about the same":
        if abs(steps) < NOT_A_REASON_S and abs(outside) < NOT_A_REASON_S:
            return "neither the steps nor the time outside them differed by much"
        return f"the steps took {more(steps)}, the time outside them {more(outside)}"
    total = steps + outside
    if steps * total > 0 and (abs(steps) >= abs(outside) or outside * total <= 0):
        rates = ""
        if run.images_per_second and reference.images_per_second:
            rates = (
                f" ({run.images_per_second:,.0f} against "
                f"{reference.images_per_second:,.0f} images/s)"
            )
        return f"the training steps, {more(steps)}{rates}"
    return (
        f"the time outside the steps, {more(outside)} (validation, checkpoints, the first "
        "epoch's extra)"
    )


def line(reference: RunTimes, run: RunTimes) -> str:
    """`run` against `reference` in one short sentence: the ratio and the reason."""
    ratio = speed_up(reference, run)
    why = reason(reference, run)
    if kind(ratio) == "about the same":
        return f"Against {reference.label}: about the same ({ratio:.2f}x)" + (
            f": {why}." if why else "."
        )
    said = (
        f"{ratio:.2f}x as fast"
        if kind(ratio) == "speed-up"
        else f"a slow-down, {1 / ratio:.2f}x as long"
    )
    return f"Against {reference.label}: {said}." + (f" What mattered: {why}." if why else "")


def flags(comparisons: list[RunTimes], run: RunTimes) -> list[str]:
    """At most one line a learner must not miss: the runs during which other processes took
    enough CPU to change a verdict above (the verdict's own test), and any run not finished."""
    unfair, unfinished = [], []
    for other in comparisons:
        ratio = speed_up(other, run)
        for each in (other, run):
            said = fairness(each, ratio, is_run=each is run)
            if any(s.startswith("Not a fair measure") for s in said) and each.label not in unfair:
                unfair.append(each.label)
            if not each.finished and each.label not in unfinished:
                unfinished.append(each.label)
    lines = []
    if unfair:
        lines.append(
            f"Not a fair measure: other processes took enough CPU during "
            f"{' and '.join(unfair)} to change a verdict above (the detail says how "
            "much). Run again when nothing else runs."
        )
    if unfinished:
        lines.append(f"Not finished: {' and '.join(unfinished)}; times cover finished epochs.")
    return lines


class Glance:
    """What the run_distributed notebook's verdict cell shows (HTML in JupyterLab, wrapped text
    elsewhere)."""

    def __init__(self, run: RunTimes, comparisons: list[RunTimes]):
        self.run = run
        self.comparisons = [c for c in comparisons if c is not None]
        self.lines = [line(c, run) for c in self.comparisons]
        self.flags = flags(self.comparisons, run)
        self.details = [
            (
                f"{run.label} against {c.label}, over "
                f"{plural(max(c.epochs_trained, run.epochs_trained), 'epoch')}",
                verdict(c, run).split("\n"),
            )
            for c in self.comparisons
        ]

    def __str__(self) -> str:
        wrap = lambda text, indent="": textwrap.fill(  # noqa: E731
            text,
            WIDTH,
            initial_indent=indent,
            subsequent_indent=indent or "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        parts = [wrap(text) for text in self.lines + self.flags]
        for title, sentences in self.details:
            parts.append("")
            parts.append(wrap(title + ":"))
            parts.extend(wrap(sentence, "  ") for sentence in sentences)
        return "\n".join(parts)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        top = "".join(paragraph_html(text, "font-weight:bold;") for text in self.lines)
        top += "".join(paragraph_html(text, "color:#cf222e;") for text in self.flags)
        folded = "".join(
            f'<p style="margin:0.6em 0 0.2em 0;"><i>{html.escape(title)}</i></p>'
            + "".join(paragraph_html(sentence) for sentence in sentences)
            for title, sentences in self.details
        )
        return (
            f'<div class="workbook-glance" style="max-width:60em;">{top}'
            f"<details><summary>The detail: each comparison in numbers</summary>"
            f"{folded}</details></div>"
        )


def glance(one_worker: RunTimes, yours: RunTimes, baseline: RunTimes | None = None) -> Glance:
    """The run_distributed notebook's verdict: your workers against the 1-worker reference, then
    the baseline."""
    return Glance(yours, [one_worker, baseline])


# What each part of the bars holds, and why it differs between the runs: the words are the
# same for everyone, the numbers are the learner's (how_to_read).
PART_WHY = {
    "steps": "the training steps at their steady pace: where data parallelism pays (the "
    "reference has one worker's share, your workers N times it; the baseline has the "
    "same cores as your workers, in one process)",
    "between": "between the steps, per epoch: each worker validates its own 1/N of the test "
    "images on its share (step 6), the workers average their metrics (step 7), and "
    "rank 0 writes the checkpoint and TensorBoard's logs",
    "extra": "the first epoch's extra: building TensorFlow's graph (on one core for a worker), "
    "the first broadcast of rank 0's weights, filling the shuffle buffer",
    "start_up": "start-up: starting the workers (each imports TensorFlow on its own share at "
    "the same time), loading the data, building the model",
    "after": "after training: the end of model.fit (deleting the training data's iterator; "
    "with tf.data's autotuner on, it waits for the autotuner's thread, which wakes at "
    "growing intervals up to a minute apart, so from nothing to a minute: the "
    "workbook's script turns it off), the evaluation of the test set on each "
    "worker's share, rank 0's per-class report, the exit",
}


def _figures(runs: list[RunTimes], value, unit: str) -> str:
    shown = [(run.label, value(run)) for run in runs]
    return ", ".join(
        f"{label} {figure:,.0f}{unit}" if unit == " images/s" else f"{label} {figure:.1f}{unit}"
        for label, figure in shown
        if figure is not None
    )


def _loaded(runs: list[RunTimes], name: str) -> str:
    """Which runs' first epoch or end other programs' CPU can explain (run_times.load_in)."""
    if name == "extra":
        loads = [(run.label, first_epoch_load(run)) for run in runs]
    elif name == "after":
        loads = [
            (run.label, load_in(run.others_after_training, run.after_training)) for run in runs
        ]
    else:
        return ""
    said = [
        f"during the {'first epoch' if name == 'extra' else 'end'} of {label} {load}"
        for label, load in loads
        if load not in (None, "not measured")
    ]
    return "; ".join(said)


class Reading:
    """how_to_read's bullets: HTML in JupyterLab, wrapped text elsewhere."""

    def __init__(self, bullets: list[str]):
        self.bullets = bullets

    def __str__(self) -> str:
        return "\n".join(
            textwrap.fill(
                b,
                WIDTH,
                initial_indent="- ",
                subsequent_indent="  ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            for b in self.bullets
        )

    __repr__ = __str__

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{code_html(b)}</li>" for b in self.bullets)
        return f'<ul style="max-width:60em;">{items}</ul>'


def how_to_read(runs: list[RunTimes], yours: RunTimes, reference: RunTimes) -> Reading:
    """The bars' parts, each with what it holds and the learner's own numbers (per run)."""
    measured = [run for run in runs if run.parts is not None]

    def per_epoch(name: str):
        """A run's part `name` per epoch trained (None where the run has no parts)."""

        def value(run: RunTimes) -> float | None:
            part = None if run.parts is None else getattr(run.parts, name)
            return None if part is None else part / run.epochs_trained

        return value

    bullets = []
    if all(run.images_per_second for run in (yours, reference)):
        ratio = yours.images_per_second / reference.images_per_second
        bullets.append(
            f"{PART_WHY['steps'][0].upper()}{PART_WHY['steps'][1:]}. Images/s of the steps: "
            f"{_figures(runs, lambda r: r.images_per_second, ' images/s')}; your workers' "
            f"steps went {ratio:.2f}x as fast as the reference's (at most "
            f"{yours.workers / reference.workers:.0f}x)."
        )
    for name, field, unit, value in (
        ("between", "between_steps", " s per epoch", per_epoch("between_steps")),
        ("extra", "first_epoch_extra", " s", lambda r: r.parts and r.parts.first_epoch_extra),
        ("start_up", "start_up", " s", lambda r: r.start_up),
        ("after", "after_training", " s", lambda r: r.after_training),
    ):
        figures = _figures(measured or runs, value, unit)
        if figures:
            why = PART_WHY[name]
            loaded = _loaded(runs, name)
            bullets.append(
                f"{why[0].upper()}{why[1:]}: {figures}"
                + (f" (but {loaded}: that can explain it too)" if loaded else "")
                + "."
            )
    waits = _figures(runs, fit_end_wait, " s")
    if waits and bullets and bullets[-1].startswith("After training"):
        bullets[-1] = bullets[-1][:-1] + f"; of it, the end of model.fit: {waits}."
    return Reading(bullets)
