"""The class report's picture: students x steps, with how many passed each step on top and each
student's problems on the right; legible from 1 to a few hundred students.

Colours: passed, failed, a script that cannot be checked (every step fails, for no step's
reason), not graded by nbgrader, no grade (not submitted, not autograded yet); a cross marks a
check cell the student tampered with. The commands that recover an ungradable submission are
printed under the map.
"""

from __future__ import annotations

from pathlib import Path

from grader.api import FAIL_COLOR, FAILED, PASS_COLOR, PASSED

# What a cell can show (StudentRow.cell), in the legend's order: a step's verdict in the
# checker's vocabulary (grader.report), or why there is none.
COLORS = {
    PASSED: PASS_COLOR,
    FAILED: FAIL_COLOR,
    "script problem": "#bf8700",  # amber: fashion_mnist.py missing or unusable
    "not graded": "#57606a",  # dark grey: nbgrader could not grade the submission
    "no grade": "#d0d7de",  # light grey: nothing graded (not submitted, not yet)
}
LEGEND = {
    "script problem": "fashion_mnist.py missing or unusable",
    "not graded": "not graded (nbgrader failed)",
    "no grade": "no grade (not submitted / not yet)",
}

# Layout, in inches (matplotlib's own unit), so that rows keep their height however many.
ROW = 0.17
COLUMN = 0.42
LABELS = 1.7  # student ids, left of the map
NOTES = 6.0  # problems, right of the map
NOTE_CHARS = 105  # what fits in NOTES at 8 points
BARS = 1.1  # passes per step, above the map
LINE = 0.15  # a line of the footer


def write_heatmap(report, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, rows = report.steps, report.rows
    footer = recovery_lines(rows)
    n = max(len(rows), 1)
    width = LABELS + COLUMN * len(steps) + NOTES
    map_height = ROW * n
    legend_height = 0.55
    height = 0.5 + BARS + 0.35 + map_height + 0.45 + legend_height + LINE * len(footer) + 0.2
    figure = plt.figure(figsize=(width, height))

    def axes_at(left, bottom, w, h):  # inches from the bottom-left corner
        return figure.add_axes([left / width, bottom / height, w / width, h / height])

    map_bottom = 0.2 + LINE * len(footer) + legend_height + 0.45
    draw_map(axes_at(LABELS, map_bottom, COLUMN * len(steps), map_height), report)
    bars = axes_at(LABELS, map_bottom + map_height + 0.35, COLUMN * len(steps), BARS)
    draw_pass_bars(bars, report)
    draw_legend_and_footer(figure, footer, width, height)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def recovery_lines(rows) -> list:
    """The footer: for each student not graded, the commands that grade them."""
    footer = []
    for row in rows:
        if row.recovery:
            footer.append(f"{row.student}, not graded: to grade it with the released notebook:")
            footer += [f"    {command}" for command in row.recovery]
    return footer


def draw_map(heat, report) -> None:
    """The map: a cell per student and step, a cross where the check cell was tampered with,
    each student's problems at the right."""
    from matplotlib.colors import ListedColormap

    steps, rows = report.steps, report.rows
    n = max(len(rows), 1)
    kinds = list(COLORS)
    codes = [[kinds.index(row.cell(s)) for s in steps] for row in rows] or [[0] * len(steps)]
    heat.imshow(
        codes,
        cmap=ListedColormap(list(COLORS.values())),
        vmin=0,
        vmax=len(kinds) - 1,
        aspect="auto",
        interpolation="nearest",
    )
    label_size = 8 if n <= 40 else 6
    heat.set_xticks(range(len(steps)), [str(s) for s in steps], fontsize=8)
    heat.set_yticks(range(len(rows)), [row.student for row in rows], fontsize=label_size)
    heat.set_xticks([x - 0.5 for x in range(1, len(steps))], minor=True)
    heat.set_yticks([y - 0.5 for y in range(1, len(rows))], minor=True)
    heat.grid(which="minor", color="white", linewidth=1 if n > 40 else 2)
    heat.tick_params(which="minor", length=0)
    heat.tick_params(axis="x", top=True, labeltop=n > 40)  # long maps: steps on top too
    heat.set_xlabel("step")

    # Tampered check cells: a cross on that student's step.
    tampered = [
        (steps.index(step), y)
        for y, row in enumerate(rows)
        for step in row.tampered_steps
        if step in steps
    ]
    if tampered:
        heat.scatter(*zip(*tampered), marker="x", color="black", s=18 if n > 40 else 40, lw=1.2)

    for y, row in enumerate(rows):
        note = row.short_problems()
        if len(note) > NOTE_CHARS:
            note = note[: NOTE_CHARS - 3] + "..."
        heat.text(len(steps) - 0.3, y, note, va="center", fontsize=label_size, clip_on=False)


def draw_pass_bars(bars, report) -> None:
    """Above the map: how many graded students passed each step, under the headline."""
    steps, graded = report.steps, report.graded
    passed = [sum(row.verdict(s) == PASSED for row in graded) for s in steps]
    bars.bar(range(len(steps)), passed, color=PASS_COLOR, width=0.8)
    for x, count in enumerate(passed):
        bars.text(x, count, str(count), ha="center", va="bottom", fontsize=7)
    bars.set_xlim(-0.5, len(steps) - 0.5)
    bars.set_ylim(0, max(len(graded), 1) * 1.25)
    bars.set_xticks([])
    bars.set_ylabel(f"passed\n(of {len(graded)})", fontsize=8)
    bars.tick_params(labelsize=7)
    for side in ("top", "right"):
        bars.spines[side].set_visible(False)
    bars.set_title(report.headline(), fontsize=10, loc="left")


def draw_legend_and_footer(figure, footer: list, width: float, height: float) -> None:
    """Below the map: the legend of the colours and the cross, then the footer's lines."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    figure.legend(
        handles=[
            *(Patch(color=color, label=LEGEND.get(kind, kind)) for kind, color in COLORS.items()),
            Line2D([], [], marker="x", color="black", lw=0, label="check cell tampered"),
        ],
        loc="lower left",
        bbox_to_anchor=(LABELS / width, (0.2 + LINE * len(footer)) / height),
        ncol=3,
        fontsize=7,
        frameon=False,
    )
    for index, line in enumerate(footer):
        figure.text(
            0.1 / width,
            (0.2 + LINE * (len(footer) - 1 - index)) / height,
            line,
            fontsize=6.5,
            family="monospace",
        )
