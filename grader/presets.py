"""The script's presets and options, as the schedule checks need them.

The starting script has a table of presets (a module-level dict of dicts with "epochs"), and
options whose defaults come from the chosen preset (`default=PRESET["warmup_epochs"]`). A check
that depends on the run asks here for each preset's values: one `Run` per preset.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from grader.verdicts import Failure
from grader.syntax import argument


@dataclass(frozen=True)
class Run:
    """What the schedule depends on in one preset's run (preset None: the script has none)."""

    preset: str | None
    warmup_end: float
    drops: tuple

    def schedule_text(self) -> str:
        whose = f"the {self.preset} preset's" if self.preset else "the workbook's"
        if not self.drops:
            return f"{whose} schedule is x1 from the end of the warmup on (no lr_drops)"
        epochs = " and ".join(map(str, self.drops)).replace(" and ", ", ", len(self.drops) - 2)
        drops = f"at each of epochs {epochs}" if len(self.drops) > 1 else f"from epoch {epochs} on"
        return f"{whose} schedule is x1 from the end of the warmup, then x0.1 {drops} (step_decay)"


def runs(script, warmup_epochs, default_drops: tuple) -> list:
    """One Run per preset (or one, without presets): its warmup length and its lr_drops
    (`default_drops` for a preset without them); [] if the grader can't tell one of them."""
    runs = []
    for preset, items in list(presets(script)) or [(None, {})]:
        warmup_end = _warmup_length(script, warmup_epochs, items)
        drops = _drops(script, items, default_drops)
        if warmup_end is None or drops is None:
            return []
        if Run(preset, warmup_end, drops) not in runs:
            runs.append(Run(preset, warmup_end, drops))
    return runs


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _warmup_length(script, warmup_epochs, preset_items):
    """The warmup length of a run with this preset: the constant given, else the preset's default
    of --warmup-epochs (or the option's constant default); None if the grader can't tell."""
    value = script.constant(warmup_epochs)
    if _number(value):
        return value
    resolved = script.resolve(warmup_epochs)
    if not (isinstance(resolved, ast.Attribute) and resolved.attr == "warmup_epochs"):
        return None
    options = option_calls(script, "warmup_epochs")
    default = argument(options[0], "default") if options else None
    value = script.constant(default) if default is not None else None
    if _number(value):
        return value
    if isinstance(default, ast.Subscript):
        item = preset_items.get(script.constant(default.slice))
        value = script.constant(item) if item is not None else None
        if _number(value):
            return value
    return None


def _drops(script, preset_items, default_drops: tuple):
    """The preset's lr_drops as a tuple of epochs; `default_drops` for a preset without them
    (an older starting script); None if the grader can't tell."""
    node = preset_items.get("lr_drops")
    if node is None:
        return default_drops
    value = script.resolve(node)
    if not isinstance(value, (ast.Tuple, ast.List)):
        return None
    epochs = tuple(script.constant(element) for element in value.elts)
    return epochs if all(_number(epoch) for epoch in epochs) else None


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
