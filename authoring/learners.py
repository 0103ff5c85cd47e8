"""The learner-style corpus (tests/grader_cases/learners): scripts built from the chain.

Each script is kept as its deviation from its base (`NAME.patch`: a unified diff against the
reference in solutions/ that truth.json's "base" names) and built from that base as it is now,
so a step added to the chain reaches every script whose deviation does not rewrite the lines
around it. The deviation is applied with fuzz (authoring/patches.py): new lines among a hunk's
context leave it in place; a chain change among the lines the script rewrote fails, naming the
script's patch, the hunk and the line it expects.

    python -m authoring.learners build OUT_DIR [NAME.py ...]   # write the scripts (all: none named)
    python -m authoring.learners record NAME.py EDITED.py      # NAME's deviation from an edited copy

Readers (tests/unit, bench/verdicts.py, the corpus's tools/) build the scripts where they read
them; none is committed whole.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from authoring.patches import PatchError, apply_patch, make_patch
from workbook.paths import REPO

CORPUS = REPO / "tests" / "grader_cases" / "learners"
TRUTH = CORPUS / "truth.json"
# Context lines a hunk may lose at each end: all 3 of them (GNU patch's default is 2), so that a
# new line right next to a line the script removed leaves the hunk in place too. Measured with
# one line added at each place of each script's base (35,185 builds): 79.7% built, and right;
# the rest fail naming the hunk: 7,154 places inside what a script rewrote, and 5 next to a hunk
# that only adds lines, whose remaining context fits two places. None misplaced. Fuzz 2: 78.5%.
FUZZ = 3
ADVICE = (
    ": the chain changed there. Make the deviation's ' ' and '-' lines the base's again and its "
    "'+' lines follow the change, or write it again from an edited script (python -m "
    "authoring.learners record NAME.py EDITED.py); a new step also needs its truth from a run "
    "(tests/grader_cases/learners/README.md)"
)


def truth() -> dict:
    """truth.json: {script name: {"base", "kind", "steps", "why", "how"[, "unshown"]}}."""
    return json.loads(TRUTH.read_text(encoding="utf-8"))


def deviation_path(name: str) -> Path:
    """NAME.py's deviation from its base: NAME.patch in the corpus."""
    return CORPUS / f"{Path(name).stem}.patch"


def deviation_names() -> list[str]:
    """The script names the corpus holds a deviation for."""
    return sorted(f"{path.stem}.py" for path in CORPUS.glob("*.patch"))


def script(name: str, base: str, base_text: str | None = None) -> str:
    """NAME.py: its base (truth.json's "base": a path in the repository) with its deviation
    applied; `base_text` stands for the base's file when given."""
    path = deviation_path(name)
    return apply_patch(
        (REPO / base).read_text(encoding="utf-8") if base_text is None else base_text,
        path.read_text(encoding="utf-8"),
        str(path.relative_to(REPO)),
        base,
        ADVICE,
        FUZZ,
    )


def scripts(names: list[str] | None = None) -> dict[str, str]:
    """{name: text} of the named scripts (all of truth.json's when none are named)."""
    known = truth()
    return {name: script(name, known[name]["base"]) for name in names or sorted(known)}


def build(out_dir: Path, names: list[str] | None = None) -> dict[str, Path]:
    """Writes the scripts into out_dir; returns {name: its path}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, text in scripts(names).items():
        paths[name] = out_dir / name
        paths[name].write_text(text, encoding="utf-8")
    return paths


def record(name: str, edited: Path) -> Path:
    """Rewrites NAME's deviation so that it turns its base into the edited script; returns
    the deviation's path."""
    known = truth()
    if name not in known:
        raise SystemExit(f"{name} has no entry in {TRUTH.relative_to(REPO)}: give it one first")
    base = known[name]["base"]
    path = deviation_path(name)
    path.write_text(
        make_patch(
            (REPO / base).read_text(encoding="utf-8"),
            Path(edited).read_text(encoding="utf-8"),
            base,
            name,
        ),
        encoding="utf-8",
    )
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m authoring.learners",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="write the scripts into a folder")
    build_command.add_argument("out_dir", type=Path)
    build_command.add_argument("names", nargs="*", help="scripts (default: all)")
    record_command = commands.add_parser("record", help="a script's deviation from an edit")
    record_command.add_argument("name")
    record_command.add_argument("edited", type=Path, help="the script as it should be")
    args = parser.parse_args(argv)
    if args.command == "record":
        print(f"wrote {record(args.name, args.edited).relative_to(REPO)}")
        return 0
    failed = 0  # every script that builds is written; each that doesn't says why
    for name in args.names or sorted(truth()):
        try:
            print(build(args.out_dir, [name])[name])
        except PatchError as error:
            print(error, file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
