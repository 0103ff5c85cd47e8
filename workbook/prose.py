"""Prose in a notebook's output: paragraphs that wrap at word boundaries, code shown as code.

    say(text)           one or more paragraphs (one per line of `text`) as notebook output
    show(text)          say(text) displayed now in a notebook; printed, wrapped, elsewhere
    paragraph_html(t)   one paragraph as HTML: escaped, `code` in backticks as <code>
    code_html(t)        the same without the paragraph, for inside an element of one's own
    plural(n, noun)     `1 GPU`, `2 GPUs`, `3 processes`

In HTML, code written without backticks is set as code too: a dotted name (`hvd.size`,
`tfa.optimizers.NovoGrad`) or a call (`hvd.init()`, `model.fit(...)`). The grader's messages
name code that way, and in a terminal they read as they are.

JupyterLab's plain-text output area breaks a long line anywhere, even inside a word, and shows
backticks as they are; the HTML of these objects wraps between words and sets code in its
font. In a terminal they are text wrapped at WIDTH, backticks kept (the Markdown convention).
"""

from __future__ import annotations

import html
import re
import sys
import textwrap

WIDTH = 88  # plain-text lines, in characters
_CODE = re.compile(r"`([^`\n]+)`")
# Code named without backticks: a dotted name of identifiers, with or without a call's
# parentheses, or a call. Not part of a path, an address or a longer word; the first part of a dotted
# name has two letters or more, so that prose's "e.g." and "i.e." stay prose, and "node(s)"
# is a plural.
_BARE_CODE = re.compile(
    r"(?<![\w./@:\\-])(?:[A-Za-z_]\w+(?:\.[A-Za-z_]\w*)+|[A-Za-z_]\w*(?=\((?!s\))))(?:\([^()\n]*\))?"
)


def paragraph_html(text: str, style: str = "") -> str:
    """`text` as one HTML paragraph: escaped, its code as <code>."""
    return f'<p style="margin:0.2em 0;max-width:60em;{style}">{code_html(text)}</p>'


def code_html(text: str) -> str:
    """`text` escaped, its code as <code>: `spans` in backticks, and dotted names and calls
    written without them (for inside an element of one's own)."""
    parts = _CODE.split(text)  # prose, code, prose, code, ..., prose
    return "".join(
        f"<code>{html.escape(part)}</code>" if index % 2 else _bare_code_html(part)
        for index, part in enumerate(parts)
    )


def _bare_code_html(prose: str) -> str:
    shown, end = [], 0
    for found in _BARE_CODE.finditer(prose):
        shown += [html.escape(prose[end : found.start()]), f"<code>{html.escape(found[0])}</code>"]
        end = found.end()
    return "".join(shown) + html.escape(prose[end:])


def plural(count: int, noun: str) -> str:
    """`2 workers`, `1 thread`, `3 processes`."""
    if count == 1:
        return f"1 {noun}"
    return f"{count} {noun}es" if noun.endswith("s") else f"{count} {noun}s"


def wrapped(text: str, indent: str = "", subsequent: str | None = None) -> str:
    """`text` wrapped at WIDTH between words (never inside one, nor at a hyphen)."""
    return textwrap.fill(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent if subsequent is None else subsequent,
        break_long_words=False,
        break_on_hyphens=False,
    )


class Said:
    """Paragraphs for a notebook's output (see the module's docstring). Empty text shows
    nothing."""

    def __init__(self, text: str, style: str = ""):
        self.text = text
        self.style = style

    def paragraphs(self) -> list[str]:
        return [paragraph for paragraph in self.text.split("\n") if paragraph]

    def __str__(self) -> str:
        return "\n".join(wrapped(paragraph) for paragraph in self.paragraphs())

    __repr__ = __str__

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        return "".join(paragraph_html(p, self.style) for p in self.paragraphs())


def say(text: str, style: str = "") -> Said:
    """`text` as notebook output that never splits a word (see Said)."""
    return Said(text, style)


def show(text: str, style: str = "") -> None:
    """Shows `text` now: as HTML in a notebook's kernel, printed and wrapped elsewhere."""
    said = say(text, style)
    if "ipykernel" in sys.modules:
        from IPython.display import display

        display(said)
    else:
        print(said, flush=True)
