"""The README's table of the steps, written from the manifest (workbook.facts.STEP_TITLES)
between its two markers, never by hand: a new step's row comes with its manifest entry.

    python -m authoring build readme   # rewrite the table in README.md
    python -m authoring check readme   # exit 1 if it is stale (the tests do this too)
"""

from __future__ import annotations

import sys

from authoring.generated import build_or_check_main, stale_names, write_changed
from authoring.notebooks import in_words
from workbook.facts import STEP_TITLES
from workbook.paths import REPO

README_NAME = "README.md"
BEGIN = "<!-- the steps: written from the manifest by python -m authoring build (authoring/readme.py) -->"
END = "<!-- end of the steps -->"


class ReadmeError(ValueError):
    """The README lacks the markers of the table."""


def steps_table() -> str:
    rows = [f"| {step} | {title} |" for step, title in STEP_TITLES.items()]
    return "\n".join(
        [f"The {in_words(len(STEP_TITLES))} steps:", "", "| step | change |", "|---|---|", *rows]
    )


def expected_files(readme_dir=REPO) -> dict[str, str]:
    text = (readme_dir / README_NAME).read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ReadmeError(f"{README_NAME}: no {BEGIN!r} ... {END!r} around the steps' table")
    head, tail = text[: start + len(BEGIN)], text[end:]
    return {README_NAME: f"{head}\n{steps_table()}\n{tail}"}


def build(readme_dir=REPO) -> list:
    return write_changed(expected_files(readme_dir), readme_dir)


def stale(readme_dir=REPO) -> list:
    return stale_names(expected_files(readme_dir), readme_dir)


def main(argv=None) -> int:
    return build_or_check_main(
        argv,
        prog="python -m authoring.readme",
        what="README tables",
        description="Write README.md's table of the steps from the manifest",
        build=build,
        stale=stale,
        source_error=ReadmeError,
    )


if __name__ == "__main__":
    sys.exit(main())
