"""The command line: python -m workbook.fashion_data prepare|verify (exit 0 ok, 1 data problem,
2 usage error). The committed sample is drawn by an authors' tool: python -m authoring.sample."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from workbook.fashion_data.messages import DataError, shown
from workbook.fashion_data.preparation import prepare
from workbook.fashion_data.prepared import DEFAULT_DIR, describe, read_manifest, verify
from workbook.fashion_data.sources import SOURCE_DIR_ENV


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m workbook.fashion_data",
        description="Prepare and verify the official Fashion-MNIST for the workbook.",
    )
    commands = cli.add_subparsers(dest="command", required=True)

    p = commands.add_parser("prepare", help="prepare the data from the first source that works")
    p.add_argument("--dest", type=Path, default=DEFAULT_DIR, help="default data/fashion_mnist")
    p.add_argument(
        "--from",
        dest="source_dir",
        type=Path,
        help=f"a directory with the 4 official files, .gz or not (or set {SOURCE_DIR_ENV})",
    )
    p.add_argument("--offline", action="store_true", help="do not try the download")
    p.add_argument(
        "--force", action="store_true", help="rebuild even if prepared (repairs a damaged copy)"
    )

    v = commands.add_parser("verify", help="check a prepared directory's checksums and shapes")
    v.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    return cli


def run(args: argparse.Namespace) -> int:
    if args.command == "prepare":
        start = time.perf_counter()
        prepare(args.dest, args.source_dir, args.offline, args.force)
        print(f"({time.perf_counter() - start:.1f} s)")
    elif args.command == "verify":
        problems = verify(args.dir)
        for problem in problems:
            print(problem)
        if problems:
            return 1
        print(f"{shown(args.dir)}: ok, {describe(read_manifest(args.dir))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return report_errors(run, args)


def report_errors(command, *args) -> int:
    """command(*args)'s exit code; a DataError or OSError (disk full, permissions) is one
    `error:` line and 1, an interrupt 130."""
    try:
        return command(*args)
    except (DataError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; nothing half-written was left behind", file=sys.stderr)
        return 130
