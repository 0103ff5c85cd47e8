"""One mistake case: a reference script edited, and the verdict its step's check must give
(the rules are in this package's text)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    step: int
    description: str
    replace_from: str | tuple
    replace_to: str | tuple
    expect_pass: bool
    expect_message: str = ""
    base: int | None = None
    replace_all: bool = False

    @property
    def base_step(self) -> int:
        return self.step if self.base is None else self.base

    @property
    def id(self) -> str:
        verdict = "ok" if self.expect_pass else "wrong"
        return f"step{self.step:02d}-{verdict}-{self.description.replace(' ', '_')}"

    def apply(self, text: str) -> str:
        """Returns `text` with the replacements made; fails if one doesn't fit."""
        sources = (self.replace_from,) if isinstance(self.replace_from, str) else self.replace_from
        targets = (self.replace_to,) if isinstance(self.replace_to, str) else self.replace_to
        assert len(sources) == len(targets), f"{self.id}: replace_from and replace_to differ"
        for source, target in zip(sources, targets):
            found = text.count(source)
            if self.replace_all:
                assert found, f"{self.id}: {source!r} not found in the reference"
            else:
                assert found == 1, f"{self.id}: {source!r} found {found} times, expected once"
            text = text.replace(source, target)
        return text
