"""The run_distributed notebook's verdict at a glance (workbook.glance): a short line per
comparison, the detail folded, how to read the bars, and text that never splits a word."""

from __future__ import annotations

import re

from run_folders import times
from workbook import verdict_text
from workbook.facts import notebook_label
from workbook.run_times import speed_up


def glance_runs():
    ref = times("1 worker (reference)", epochs=(80, 60), steps=(60, 50), speed=1130)
    yours = times(
        "your workers",
        epochs=(55, 35, 35, 35, 35),
        workers=2,
        steps=(40, 28, 28, 28, 28),
        speed=1736,
    )
    base = times(
        f"the baseline ({notebook_label('welcome')})",
        epochs=(50, 35, 35, 36, 36),
        share=None,
        steps=(35, 30, 30, 30, 30),
        speed=1780,
    )
    return ref, yours, base


def test_the_verdict_first_a_short_line_per_comparison_then_the_detail_folded():
    from workbook.glance import WIDTH, glance

    ref, yours, base = glance_runs()
    shown = glance(ref, yours, base)
    assert len(shown.lines) == 2 and not shown.flags
    ratio = speed_up(ref, yours)
    assert shown.lines[0].startswith(f"Against 1 worker (reference): {ratio:.2f}x as fast.")
    assert "What mattered: the training steps" in shown.lines[0]
    assert "(1,736 against 1,130 images/s)" in shown.lines[0]
    assert shown.lines[1].startswith(
        f"Against the baseline ({notebook_label('welcome')}): about the same "
        f"({speed_up(base, yours):.2f}x)"
    )
    assert all(len(text) < 160 for text in shown.lines)  # a glance: two short sentences
    page = shown._repr_html_()
    top, folded = page.split("<details>")
    assert top.count("<p ") == 2 and "Scaling efficiency" in folded
    # Every sentence of the full verdicts is in the fold, none is lost.
    for sentence in verdict_text.verdict(ref, yours).split("\n"):
        assert html_escape(sentence) in folded
    # As text: wrapped at word boundaries, never inside a word.
    words = set(str(shown).split())
    for text in shown.lines:
        assert set(text.split()) <= words
    assert max(len(row) for row in str(shown).splitlines()) <= WIDTH


def html_escape(text):
    import html

    return html.escape(text)


def test_a_slow_down_its_reason_and_an_unfair_measure_come_first():
    from workbook.glance import glance

    base = times("baseline", epochs=(50, 35), share=None, steps=(35, 30), speed=1780)
    slow = times(
        "your workers", epochs=(95, 45), workers=2, steps=(40, 28), speed=1736, others=300.0
    )
    shown = glance(base, slow)
    assert shown.lines[0].startswith("Against baseline: a slow-down, ")
    assert "What mattered: the time outside the steps, 59 s more" in shown.lines[0]
    assert len(shown.flags) == 1 and shown.flags[0].startswith(
        "Not a fair measure: other processes took enough CPU during your workers to change"
    )
    both = glance(times("ref", others=300.0), slow, base)  # each flagged once, in one line
    assert len(both.flags) == 1 and "during ref and your workers" in both.flags[0]
    assert "Not a fair measure" in shown._repr_html_().split("<details>")[0]


def test_how_to_read_the_bars_gives_each_runs_numbers():
    from workbook.glance import how_to_read

    ref, yours, base = glance_runs()
    text = str(how_to_read([ref, yours, base], yours, ref))
    assert "your workers' steps went 1.54x as fast as the reference's (at most 2x)" in " ".join(
        text.split()
    )
    flat = " ".join(text.split())
    assert "1 worker (reference) 15.0 s per epoch, your workers 8.6 s per epoch" in flat
    assert "twice as fast" not in flat


def test_code_in_the_verdict_shows_as_code_not_backticks():
    from workbook.glance import glance

    base = times("baseline", epochs=(50, 35), share=None, steps=(35, 30), speed=1780)
    slow = times(
        "your workers",
        epochs=(95, 45),
        workers=2,
        steps=(40, 28),
        speed=1736,
        busy=["`python busy.py --forever` (pid 42) used 95% of a core for 60 s"],
    )
    page = glance(base, slow)._repr_html_()
    assert "<code>python busy.py --forever</code> (pid 42)" in page
    assert "`" not in page


def test_prose_wraps_between_words_and_sets_code_in_code():
    from workbook.prose import WIDTH, say

    text = (
        "The reading can't tell for sure (the callbacks are built in `make_callbacks()`, "
        "which the check cannot follow): running your script to decide " * 2
    ).strip()
    shown = say(text)
    assert str(shown).split() == text.split()
    assert max(len(row) for row in str(shown).splitlines()) <= WIDTH
    page = shown._repr_html_()
    assert page.count("<code>make_callbacks()</code>") == 2 and "`" not in page
    assert "can&#x27;t" in page  # escaped, as everything else


def test_code_written_without_backticks_is_set_as_code_too():
    """The grader's messages name code bare (`hvd.size()`, `tfa.optimizers.NovoGrad`): in HTML
    it is code all the same; prose's abbreviations, plurals, numbers and paths stay prose."""
    from workbook.prose import code_html

    shown = code_html(
        "line 12: it can't follow the callbacks passed to model.fit on line 40 (`cbs`), e.g. "
        "callbacks = [...]: multiply it by hvd.size() (Horovod 0.28.1, 2 node(s), "
        "logs/run-1/horovodrun.log), custom_optimizers=[tfa.optimizers.NovoGrad] & <b>"
    )
    assert [code for code in re.findall(r"<code>(.*?)</code>", shown)] == [
        "model.fit",
        "cbs",
        "hvd.size()",
        "tfa.optimizers.NovoGrad",
    ]
    assert "e.g. " in shown and "node(s)" in shown and "&amp; &lt;b&gt;" in shown
