"""python -m authoring build|check [chain|notebooks]: the chain first, since notebooks quote it."""

from __future__ import annotations

import argparse
import sys

from authoring import chain, notebooks

GENERATORS = {"chain": chain.main, "notebooks": notebooks.main}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m authoring", description=__doc__)
    parser.add_argument("command", choices=["build", "check"])
    parser.add_argument("what", nargs="?", choices=["all", *GENERATORS], default="all",
                        help="what to build or check (default: all)")
    args = parser.parse_args(argv)
    status = 0
    for name in GENERATORS if args.what == "all" else [args.what]:
        status = max(status, GENERATORS[name]([args.command]))
    return status


if __name__ == "__main__":
    sys.exit(main())
