"""The chain of training scripts, rendered from one annotated source.

`solutions/source/fashion_mnist.steps.py` holds the starting script and every Horovod step
(workbook.facts.STEPS). Block markers, each on its own line and indented like the code around
them, say which lines belong to which step:

    #@ step 4
    # Horovod: wrap the optimizer so that every step averages the gradients of all workers.
    opt = hvd.DistributedOptimizer(opt)
    #@ else
    # TODO: Step 4 - wrap the optimizer in hvd.DistributedOptimizer.
    #@ end

Rendering at step n keeps the `#@ step k` branch if n >= k and the `#@ else` branch (optional)
if n < k. Blocks nest, so a later step can rewrite lines an earlier one introduced. Marker
lines are never emitted.

A `#@ bonus NAME` block (NAME in BONUSES) holds the answer of a bonus exercise: it appears only
in that bonus's reference, which is the solution with its bonus blocks (`#@ else`: the lines
they replace), so the bonus reference never drifts from the chain. A variant that rewrites the
training part (the elastic script) is the solution with a patch applied instead: see
authoring/variants.py.

    python -m authoring build chain   # write the scripts in solutions/ (and solutions/bonus/)
    python -m authoring check chain   # exit 1 if any of them is stale
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from authoring import variants
from authoring.generated import build_or_check_main, stale_names, write_changed
from authoring.patches import PatchError
from workbook.facts import BONUSES, LAST_STEP, SOLUTION_FILE_NAME, chain_file_name
from workbook.paths import REPO, SOLUTIONS_DIR

SOURCE = SOLUTIONS_DIR / "source" / "fashion_mnist.steps.py"
OUTPUT_DIR = SOLUTIONS_DIR

_MARKER = re.compile(r"^(?P<indent>[ \t]*)#@(?P<rest>.*)$")
_STEP = re.compile(r"step\s+(\d+)")
_BONUS = re.compile(r"bonus\s+([a-z][a-z0-9_]*)")


class StepSyntaxError(ValueError):
    """A malformed `#@` marker in the annotated source."""

    def __init__(self, message: str, line: int, filename: str = "<source>"):
        super().__init__(f"{filename}:{line}: {message}")
        self.line = line


@dataclass
class Block:
    """A `#@ step k` block: lines kept from step k on, and the optional else lines before it.

    A `#@ bonus NAME` block has `bonus` set (and step 0): its lines are kept only in the
    reference of that bonus.
    """

    step: int
    line: int  # 1-based line of the `#@ step` marker
    indent: str
    then: list = field(default_factory=list)
    orelse: list = field(default_factory=list)
    has_else: bool = False
    bonus: str | None = None

    @property
    def label(self) -> str:
        return f"bonus {self.bonus}" if self.bonus else f"step {self.step}"

    @property
    def key(self):
        """What render_lines records for the lines inside: the step number, or the bonus name."""
        return self.bonus or self.step


@dataclass(frozen=True)
class Line:
    """A source line, with its 1-based line number in the annotated source."""

    text: str
    line: int


def parse(source_text: str, filename: str = "<source>") -> list:
    """Returns the source as a tree: a list of `Line` and `Block` items.

    Raises StepSyntaxError (with the line number) for a malformed marker: an unknown
    directive, a step number outside 1..LAST_STEP, `else` or `end` without a `step`, a second
    `else`, a marker indented differently from its block's `step`, or an unclosed block.
    """
    root: list = []
    stack: list = []  # open blocks, innermost last
    for number, text in enumerate(source_text.splitlines(), start=1):
        match = _MARKER.match(text)
        if not match:
            _lines_of(root, stack).append(Line(text, number))
            continue
        indent, directive = match.group("indent"), match.group("rest").strip()
        if directive.startswith(("step", "bonus")):
            block = _opened_block(directive, text, indent, number, filename)
            _lines_of(root, stack).append(block)
            stack.append(block)
        elif directive in ("else", "end"):
            _else_or_end(stack, directive, indent, number, filename)
        else:
            raise StepSyntaxError(
                f"unknown marker {text.strip()!r} "
                "(expected '#@ step N', '#@ bonus NAME', '#@ else' or '#@ end')",
                number,
                filename,
            )
    if stack:
        block = stack[-1]
        raise StepSyntaxError(
            f"'#@ {block.label}' is never closed with '#@ end'", block.line, filename
        )
    return root


def _lines_of(root: list, stack: list) -> list:
    """Where the next item goes: the innermost open block's current branch, else the top."""
    if not stack:
        return root
    block = stack[-1]
    return block.orelse if block.has_else else block.then


def _opened_block(directive: str, text: str, indent: str, number: int, filename: str) -> Block:
    """The block that a `#@ step N` or `#@ bonus NAME` marker (the line `text`) opens."""
    if directive.startswith("step"):
        step_match = _STEP.fullmatch(directive)
        if not step_match:
            raise StepSyntaxError(f"expected '#@ step N', got {text.strip()!r}", number, filename)
        step = int(step_match.group(1))
        if not 1 <= step <= LAST_STEP:
            raise StepSyntaxError(f"step number {step} is outside 1..{LAST_STEP}", number, filename)
        return Block(step=step, line=number, indent=indent)
    bonus_match = _BONUS.fullmatch(directive)
    if not bonus_match:
        raise StepSyntaxError(f"expected '#@ bonus NAME', got {text.strip()!r}", number, filename)
    name = bonus_match.group(1)
    if name not in BONUSES:
        known = ", ".join(sorted(BONUSES))
        raise StepSyntaxError(
            f"unknown bonus {name!r} (known: {known}; add it to BONUSES)", number, filename
        )
    return Block(step=0, line=number, indent=indent, bonus=name)


def _else_or_end(stack: list, directive: str, indent: str, number: int, filename: str) -> None:
    """`#@ else` turns the innermost open block to its else branch; `#@ end` closes it."""
    if not stack:
        raise StepSyntaxError(f"'#@ {directive}' without '#@ step'", number, filename)
    block = stack[-1]
    if indent != block.indent:
        raise StepSyntaxError(
            f"'#@ {directive}' is indented differently from its '#@ {block.label}' "
            f"on line {block.line}",
            number,
            filename,
        )
    if directive == "end":
        stack.pop()
    elif block.has_else:
        raise StepSyntaxError(
            f"second '#@ else' in the block of line {block.line}", number, filename
        )
    else:
        block.has_else = True


def render_lines(
    source_text: str, step: int, filename: str = "<source>", bonus: str | None = None
) -> list:
    """Returns the script at `step` as (text, steps) pairs, one per output line.

    `steps` is the frozenset of the step numbers of all blocks enclosing that source line
    (in either branch): a line that changes between step n-1 and step n lies in a step-n block.
    Bonus blocks add their name instead; their lines are kept only when `bonus` is that name.
    """
    if not 0 <= step <= LAST_STEP:
        raise ValueError(f"step must be in 0..{LAST_STEP}, not {step}")
    if bonus is not None and bonus not in BONUSES:
        raise ValueError(f"bonus must be one of {sorted(BONUSES)}, not {bonus!r}")
    out: list = []

    def walk(items: list, enclosing: frozenset) -> None:
        for item in items:
            if isinstance(item, Line):
                out.append((item.text, enclosing))
            else:
                keep = item.bonus == bonus if item.bonus else step >= item.step
                walk(item.then if keep else item.orelse, enclosing | {item.key})

    walk(parse(source_text, filename), frozenset())
    return out


def render(
    source_text: str, step: int, filename: str = "<source>", bonus: str | None = None
) -> str:
    """Returns the script at `step` (0: the starting script, LAST_STEP: the solution).

    With `bonus`, that bonus's blocks are kept too: render(text, LAST_STEP, bonus="alexnet")
    is the reference of the AlexNet bonus.
    """
    return "".join(text + "\n" for text, _ in render_lines(source_text, step, filename, bonus))


def render_bonus(source_text: str, bonus: str, filename: str = "<source>") -> str:
    """Returns the reference script of a bonus: the solution plus that bonus's blocks."""
    return render(source_text, LAST_STEP, filename, bonus)


output_name = chain_file_name  # the file name of the script at `step` in solutions/


def render_solution(source_path: Path) -> str:
    """The solution (the script after the last step), rendered from the source file."""
    return render(Path(source_path).read_text(encoding="utf-8"), LAST_STEP, str(source_path))


def chain_files(source_path: Path | None = None) -> dict:
    """Returns {file name: text} of the scripts rendered from the source: the chain, the
    solution and the bonus references."""
    source_path = Path(source_path or SOURCE)
    source_text = source_path.read_text(encoding="utf-8")
    files = {}
    for step in range(LAST_STEP + 1):
        files[output_name(step)] = render(source_text, step, str(source_path))
    files[SOLUTION_FILE_NAME] = files[output_name(LAST_STEP)]
    for bonus, name in BONUSES.items():
        files[name] = render_bonus(source_text, bonus, str(source_path))
    return files


def expected_files(source_path: Path | None = None) -> dict:
    """Returns {file name: text} of every generated script: chain_files() and the variants."""
    files = chain_files(source_path)
    return {**files, **variants.expected_files(files[SOLUTION_FILE_NAME])}


def stale_files(source_path: Path | None = None, output_dir: Path | None = None) -> list:
    """Returns the names of the generated scripts that are missing or out of date."""
    return stale_names(expected_files(source_path), Path(output_dir or OUTPUT_DIR))


def build(source_path: Path | None = None, output_dir: Path | None = None) -> list:
    """Writes the scripts that changed; returns their names. The chain is written even when a
    variant's patch no longer applies (PatchError, raised after)."""
    output_dir = Path(output_dir or OUTPUT_DIR)
    files = chain_files(source_path)
    written = write_changed(files, output_dir)
    return written + write_changed(variants.expected_files(files[SOLUTION_FILE_NAME]), output_dir)


def main(argv=None) -> int:
    return build_or_check_main(
        argv,
        prog="python -m authoring.chain",
        what="step scripts",
        description=f"Render the step scripts in solutions/ from {SOURCE.relative_to(REPO)}",
        build=build,
        stale=stale_files,
        source_error=(StepSyntaxError, PatchError),
    )


if __name__ == "__main__":
    sys.exit(main())
