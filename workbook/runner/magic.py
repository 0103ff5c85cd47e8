"""The `%horovodrun` IPython line magic: its arguments, and its registration by %load_ext."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from workbook.runner.cell import horovodrun
from workbook.runner.command import RunOptions
from workbook.runner.display import RunResult
from workbook.runner.horovodrun_cli import (
    NP_OPTIONS,
    option_value,
    split_horovodrun_args,
    without_option,
)


@dataclass
class MagicArgs:
    np: str
    timeout: float | None
    run_name: str | None
    command: list[str]  # horovodrun options other than -np, then the script and its arguments


def parse_magic_line(line: str) -> MagicArgs:
    """`%horovodrun [-np N|auto] [--timeout S] [--name RUN] [horovodrun options] script args`"""
    options, command = split_horovodrun_args(shlex.split(line))
    np_ = option_value(options, NP_OPTIONS) or "auto"
    timeout = option_value(options, ("--timeout",))
    run_name = option_value(options, ("--name",))
    options = without_option(options, NP_OPTIONS + ("--timeout", "--name"))
    if not command:
        raise ValueError(
            "usage: %horovodrun [-np N|auto] [--timeout S] [--name RUN] "
            "[horovodrun options] script.py [script arguments]"
        )
    return MagicArgs(np_, float(timeout) if timeout else None, run_name, options + command)


def horovodrun_magic(line: str) -> RunResult:
    """%horovodrun [-np N|auto] [--timeout S] [--name RUN] [horovodrun options] script args"""
    args = parse_magic_line(line)
    options = RunOptions(np=args.np, timeout=args.timeout, run_name=args.run_name)
    return horovodrun(args.command, options=options)


def load_ipython_extension(ipython) -> None:
    """`%load_ext workbook.runner` registers the %horovodrun line magic."""
    ipython.register_magic_function(horovodrun_magic, magic_kind="line", magic_name="horovodrun")
