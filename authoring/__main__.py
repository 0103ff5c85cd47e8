"""python -m authoring build|check [chain|notebooks|readme]: the chain first, since notebooks quote
it; then README.md's table of the steps.

python -m authoring record VARIANT EDITED.py: rewrite a variant's patch from an edited copy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from authoring import chain, notebooks, readme, variants
from authoring.generated import REGENERATE_COMMAND
from workbook.paths import REPO

GENERATORS = {"chain": chain.main, "notebooks": notebooks.main, "readme": readme.main}


def record(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m authoring record",
        description="Rewrite a variant's patch from an edited copy.",
    )
    parser.add_argument("variant", choices=sorted(variants.VARIANTS))
    parser.add_argument("edited", type=Path, help="the variant as it should be")
    args = parser.parse_args(argv)
    solution = chain.render_solution(chain.SOURCE)
    patch_path = variants.record(args.variant, args.edited, solution)
    print(f"wrote {patch_path.relative_to(REPO)}; now run {REGENERATE_COMMAND}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["record"]:
        return record(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m authoring", description=__doc__)
    parser.add_argument("command", choices=["build", "check"])
    parser.add_argument(
        "what",
        nargs="?",
        choices=["all", *GENERATORS],
        default="all",
        help="what to build or check (default: all)",
    )
    args = parser.parse_args(argv)
    status = 0
    for name in GENERATORS if args.what == "all" else [args.what]:
        status = max(status, GENERATORS[name]([args.command]))
    return status


if __name__ == "__main__":
    sys.exit(main())
