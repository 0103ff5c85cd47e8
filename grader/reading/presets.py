"""The script's presets and options, as step 11's check needs them.

The starting script has a table of presets (a module-level dict of dicts with "epochs"), and
options whose defaults come from the chosen preset (`default=PRESET["warmup_epochs"]`):
`presets(script)` reads the table, `option_calls(script, dest)` the add_argument calls that store
an option, and `option_failure(script)` says when --warmup-epochs is missing or a preset lacks
its default.
"""

from __future__ import annotations

import ast

from grader.reading.syntax import argument
from grader.reading.verdicts import Failure


def option_failure(script):
    """args.warmup_epochs needs its --warmup-epochs option, and every preset a default."""
    if "warmup_epochs" not in script.attributes:
        return None
    options = option_calls(script, "warmup_epochs")
    if not options:
        return Failure(
            "args.warmup_epochs is used, but parse_args() has no --warmup-epochs option: add it"
        )
    default = argument(options[0], "default")
    if isinstance(default, ast.Subscript):
        key = script.constant(default.slice)
        for preset, keys in presets(script):
            if isinstance(key, str) and key not in keys:
                return Failure(
                    f"the {preset!r} preset has no {key!r}, so --warmup-epochs' default raises "
                    f"KeyError: add {key}=... to every preset",
                    options[0].lineno,
                )
    return None


def option_calls(script, dest: str) -> list:
    """The parser.add_argument(...) calls that store args.<dest>."""
    return [
        call
        for call in script.calls
        if getattr(call.func, "attr", "") == "add_argument" and _defines(script, call, dest)
    ]


def _defines(script, add_argument, dest: str) -> bool:
    """True if this option is stored as args.<dest> (--some-name, or dest=...)."""
    if script.constant(argument(add_argument, "dest")) == dest:
        return True
    for flag in add_argument.args:
        value = script.constant(flag)
        if isinstance(value, str) and value.startswith("--"):
            return value[2:].replace("-", "_") == dest
    return False


def presets(script):
    """(name, {key: value node}) of each preset: a module-level table of dicts with 'epochs'."""
    for bindings in script.bindings.values():
        for binding in bindings:
            table = binding.value
            if not isinstance(table, ast.Dict):
                continue
            for name, value in zip(table.keys, table.values):
                items = _dict_items(script, value)
                if items is not None and "epochs" in items:
                    yield script.constant(name), items


def _dict_items(script, value):
    if isinstance(value, ast.Dict):
        return {script.constant(k): v for k, v in zip(value.keys, value.values) if k is not None}
    if isinstance(value, ast.Call) and script.qualified_name(value.func) == "dict":
        return {keyword.arg: keyword.value for keyword in value.keywords if keyword.arg}
    return None
