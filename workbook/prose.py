"""Prose in a notebook's output: paragraphs that wrap at word boundaries, code shown as code.

    say(text)           one or more paragraphs (one per line of `text`) as notebook output
    show(text)          say(text) displayed now in a notebook; printed, wrapped, elsewhere
    paragraph_html(t)   one paragraph as HTML: escaped, `code` in backticks as <code>

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


def paragraph_html(text: str, style: str = "") -> str:
    """`text` as one HTML paragraph: escaped, each `code` span as <code>."""
    escaped = _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text))
    return f'<p style="margin:0.2em 0;max-width:60em;{style}">{escaped}</p>'


def code_html(text: str) -> str:
    """`text` escaped, its `code` spans as <code> (for inside an element of one's own)."""
    return _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text))


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
