"""horovodrun's command line, as horovodrun's own parser reads it.

Which options take no value (`--verbose`, `--gloo`) and which take two
(`--blacklist-cooldown-range`) is asked of horovodrun's argparse parser, not copied: a table
kept by hand would drift from the installed Horovod. Horovod 0.28.1 has no function that
returns that parser: horovod.runner.launch.parse_args() builds it and parses sys.argv at once.
`horovodrun_parser()` runs that function with an ArgumentParser that hands itself back instead
of parsing. Horovod's launcher module is imported on the first command line read (about 0.1 s,
no TensorFlow), not when the runner is imported.
"""

from __future__ import annotations

import argparse
import functools
import threading
import types

NP_OPTIONS = ("-np", "--num-proc")
HOSTS_OPTIONS = ("-H", "--hosts")
HOSTFILE_OPTIONS = ("-hostfile", "--hostfile")
CONTROLLER_FLAGS = ("--gloo", "--mpi", "--jsrun")
ELASTIC_OPTIONS = (
    "--min-np",
    "--min-num-proc",
    "--max-np",
    "--max-num-proc",
    "--host-discovery-script",
)
SSH_PORT_OPTIONS = ("-p", "--ssh-port")
SSH_IDENTITY_OPTIONS = ("-i", "--ssh-identity-file")
START_TIMEOUT_OPTIONS = ("--start-timeout",)
TIMELINE_OPTIONS = ("--timeline-filename",)


class _Built(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__("horovodrun's parser, built")
        self.parser = parser


class _HandedBack(argparse.ArgumentParser):
    """An ArgumentParser that, asked to parse the first time, hands itself back instead (as the
    _Built exception); after that, it parses as any."""

    handed_back = False

    def parse_args(self, args=None, namespace=None):
        if not self.handed_back:
            self.handed_back = True
            raise _Built(self)
        return super().parse_args(args, namespace)


_building = threading.Lock()


@functools.cache
def horovodrun_parser() -> argparse.ArgumentParser:
    """The argparse parser of the installed horovodrun."""
    try:
        from horovod.runner import launch
    except ImportError as error:
        raise ImportError(
            f"horovodrun's options are read from Horovod's own parser, and Horovod cannot be "
            f"imported here ({error}); run `make env`"
        ) from error
    # Only horovod.runner.launch sees the substitute argparse, and only while it builds.
    substitute = types.ModuleType("argparse")
    substitute.__dict__.update(vars(argparse))
    substitute.ArgumentParser = _HandedBack
    with _building:
        original = launch.argparse
        launch.argparse = substitute
        try:
            launch.parse_args()
        except _Built as built:
            return built.parser
        finally:
            launch.argparse = original
    raise RuntimeError(
        "horovod.runner.launch.parse_args() did not parse with argparse: this Horovod builds "
        "its command line differently from 0.28.1"
    )


@functools.cache
def options_by_count() -> tuple[frozenset[str], frozenset[str]]:
    """horovodrun's options that take no value (`-h`, `--verbose`, `--gloo`, ...), and those
    that take two (`--blacklist-cooldown-range 10 100`)."""
    flags, pairs = set(), set()
    for action in horovodrun_parser()._actions:  # argparse keeps no public list of them
        if action.nargs == 0:
            flags.update(action.option_strings)
        elif action.nargs == 2:
            pairs.update(action.option_strings)
    return frozenset(flags), frozenset(pairs)


def split_horovodrun_args(tokens: list[str]) -> tuple[list[str], list[str]]:
    """Splits `[horovodrun options...] command [args...]` the way horovodrun does.

    Options horovodrun does not know (the magic's --timeout, --name) take one value.
    """
    flags, pairs = options_by_count()
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if not token.startswith("-") or token == "-":
            break
        if token == "--":
            return tokens[:index], tokens[index + 1 :]
        if "=" in token or token in flags:
            index += 1
        elif token in pairs:
            index += 3
        else:
            index += 2
    return tokens[:index], tokens[index:]


def option_value(options: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the last of `names` in a horovodrun option list (`-np 2` or `-np=2`)."""
    value = None
    for index, token in enumerate(options):
        name, equals, inline = token.partition("=")
        if name in names:
            value = inline if equals else (options[index + 1] if index + 1 < len(options) else None)
    return value


def has_option(options: list[str], names: tuple[str, ...]) -> bool:
    return any(token.partition("=")[0] in names for token in options)


def without_option(options: list[str], names: tuple[str, ...]) -> list[str]:
    """The option list without `names` and their values."""
    kept, skip = [], False
    for token in options:
        if skip:
            skip = False
            continue
        name, equals, _ = token.partition("=")
        if name in names:
            skip = not equals
            continue
        kept.append(token)
    return kept
