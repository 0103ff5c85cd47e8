"""Timeline: Horovod's timeline of a run, read step by step and rank by rank, and drawn.

`horovodrun --timeline-filename FILE` (the runner: `timeline=True`) makes rank 0, which
coordinates the workers, write a Chrome trace (JSON, readable in chrome://tracing): one
"process" per tensor, named after it, and for every collective operation on it
- NEGOTIATE_ALLREDUCE (or _BROADCAST...): from the first rank asking for the tensor until every
  rank has; inside it, an instant event per rank, named by the rank, when that rank asked
  (Horovod 0.28.1 records these for every step only without its response cache, which the
  runner turns off for a timeline run);
- ALLREDUCE (or BROADCAST...): the operation itself, with GLOO_ALLREDUCE or MPI_ALLREDUCE and
  the copies in and out of the fusion buffer inside; its end carries the tensor's shape.

A training step allreduces every gradient once (hvd.DistributedOptimizer names them
`Distributed<Optimizer>_Allreduce/...`), so step k is the k-th allreduce of each gradient.
Each rank's step, from the end of the previous step's allreduces, splits into
- compute: until that rank asked for its last gradient (forward, backward, the optimizer's
  update, the input pipeline; allreduces of earlier gradients overlap it);
- waiting: until the last rank asked (negotiation: waiting for the slower worker);
- allreduce: until the last gradient was reduced (communication nothing overlapped).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

GRADIENT_SCOPE = re.compile(r"Distributed\w*_Allreduce/")  # hvd.DistributedOptimizer's scope
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4, "int64": 8}
PHASES = ("compute", "waiting", "allreduce")
COLORS = {"compute": "#4c72b0", "waiting": "#dd8452", "allreduce": "#c44e52"}


class TimelineError(ValueError):
    """A timeline that cannot be read as Horovod's (missing, empty, not a Chrome trace)."""


@dataclass
class Collective:
    """One collective operation on one tensor. Times in seconds since the timeline started."""

    tensor: str
    kind: str  # ALLREDUCE, BROADCAST, ALLGATHER...
    asked_first: float  # NEGOTIATE_... began: the first rank asked
    agreed: float | None = None  # NEGOTIATE_... ended: every rank had asked
    asked: dict[int, float] = field(default_factory=dict)  # rank: when it asked
    start: float | None = None
    end: float | None = None
    shape: str | None = None
    dtype: str | None = None

    @property
    def bytes(self) -> int:
        if not self.shape:
            return 0
        dims = [int(d) for d in re.findall(r"\d+", self.shape)]
        return int(np.prod(dims, dtype=np.int64)) * DTYPE_BYTES.get(self.dtype or "", 4)


@dataclass
class Step:
    """One training step as each rank lived it, in seconds."""

    number: int  # 1 is the first step of the run
    begin: float  # the end of the previous step's allreduces
    asked: dict[int, float]  # rank: when it asked for its last gradient
    agreed: float  # when the last rank had asked
    done: float  # when the last gradient was reduced
    other_work: bool = False  # other Horovod work (a broadcast, metric averaging) went on

    @property
    def seconds(self) -> float:
        return self.done - self.begin

    def phases(self, rank: int) -> dict[str, float]:
        """{compute, waiting, allreduce} seconds of this step on `rank`; they add up to it."""
        asked = min(max(self.asked[rank], self.begin), self.agreed)
        return {
            "compute": asked - self.begin,
            "waiting": self.agreed - asked,
            "allreduce": self.done - self.agreed,
        }


@dataclass
class Timeline:
    collectives: list[Collective]
    started_at: float | None  # time.time() of the timeline's zero, if Horovod wrote it
    path: Path | None = None

    @property
    def ranks(self) -> list[int]:
        return sorted({rank for c in self.collectives for rank in c.asked})

    def gradients(self) -> list[Collective]:
        """The allreduces of the gradients (none with one worker: hvd.DistributedOptimizer
        skips them when hvd.size() is 1)."""
        return [
            c
            for c in self.collectives
            if c.kind == "ALLREDUCE" and c.end is not None and GRADIENT_SCOPE.search(c.tensor)
        ]

    def steps(self) -> list[Step]:
        """Every training step but the first (which has no previous step to begin from)."""
        by_tensor = defaultdict(list)
        for c in self.gradients():
            by_tensor[c.tensor].append(c)
        if not by_tensor:
            return []
        count = min(len(each) for each in by_tensor.values())
        rounds = [[each[k] for each in by_tensor.values()] for k in range(count)]
        gradient_ids = {id(c) for c in self.gradients()}
        others = [c for c in self.collectives if id(c) not in gradient_ids]
        steps = []
        for k in range(1, count):
            begin = max(c.end for c in rounds[k - 1])
            this = rounds[k]
            ranks = sorted({rank for c in this for rank in c.asked})
            if not ranks:
                raise TimelineError(
                    f"step {k + 1} has no time per rank: Horovod's response cache was on. "
                    "Record the timeline with the runner's timeline=True, which turns it off "
                    "(HOROVOD_CACHE_CAPACITY=0)"
                )
            asked = {rank: max(c.asked[rank] for c in this if rank in c.asked) for rank in ranks}
            agreed = max(c.agreed for c in this if c.agreed is not None)
            done = max(c.end for c in this)
            first = min(c.asked_first for c in this)
            # Other collectives between the steps: the broadcast after the first step, the
            # metric averaging at the end of an epoch, with validation before it.
            busy = any(
                begin <= o.asked_first <= first or begin <= (o.end or -1) <= first for o in others
            )
            steps.append(Step(k + 1, begin, asked, agreed, done, other_work=busy))
        return steps

    def gradient_bytes_per_step(self) -> int:
        first = {}
        for c in self.gradients():
            first.setdefault(c.tensor, c)
        return sum(c.bytes for c in first.values())


def read_timeline(path: str | Path) -> Timeline:
    """Reads Horovod's timeline file; also one cut short (a run stopped while writing it)."""
    path = Path(path)
    if not path.is_file():
        raise TimelineError(f"no timeline at {path}: did the run have timeline=True?")
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    if not text:
        raise TimelineError(f"{path} is empty: the run stopped before Horovod started")
    if text.startswith("[") and not text.endswith("]"):
        text = text.rstrip(",") + "]"  # Horovod closes the list only when it shuts down
    try:
        events = json.loads(text)
    except json.JSONDecodeError as error:
        raise TimelineError(f"{path} is not a Chrome trace (JSON): {error}") from None
    if not isinstance(events, list):
        raise TimelineError(f"{path} is not a Chrome trace: a list of events was expected")
    return parse_events(events, path)


def parse_events(events: list[dict], path: Path | None = None) -> Timeline:
    names, started_at = {}, None
    open_ops: dict[int, Collective] = {}  # pid: the collective being negotiated or run
    depth: dict[int, list[str]] = defaultdict(list)  # pid: the names of its open phases
    collectives = []
    for event in events:
        pid, phase, name = event.get("pid"), event.get("ph"), event.get("name")
        seconds = event.get("ts", 0) / 1e6
        if phase == "M":
            args = event.get("args", {})
            if name == "process_name" and "name" in args:
                names[pid] = args["name"]
            if "start_time_since_epoch_in_micros" in args:
                started_at = args["start_time_since_epoch_in_micros"] / 1e6
        elif phase == "B":
            stack = depth[pid]
            if not stack and name.startswith("NEGOTIATE_"):
                op = Collective(names.get(pid, str(pid)), name[len("NEGOTIATE_") :], seconds)
                open_ops[pid] = op
                collectives.append(op)
            elif not stack and pid in open_ops:
                open_ops[pid].start = seconds
            stack.append(name)
        elif phase == "X" and pid in open_ops and str(name).isdigit():
            open_ops[pid].asked[int(name)] = seconds
        elif phase == "E" and depth[pid]:
            finished = depth[pid].pop()
            op = open_ops.get(pid)
            if depth[pid] or op is None:
                continue
            if finished.startswith("NEGOTIATE_"):
                op.agreed = seconds
            else:
                op.end = seconds
                args = event.get("args", {})
                op.shape, op.dtype = args.get("shape"), args.get("dtype")
    return Timeline(collectives, started_at, path)


# ---------------------------------------------------------------------------------------------
# What a learner sees
# ---------------------------------------------------------------------------------------------


def summary(timeline: Timeline) -> dict:
    """The mean of each phase per rank over the plain steps (milliseconds), and their shares."""
    steps = [s for s in timeline.steps() if not s.other_work]
    result = {
        "steps": len(steps),
        "left_out": len(timeline.steps()) - len(steps) + 1,  # + the first step
        "gradient_megabytes": timeline.gradient_bytes_per_step() / 1e6,
        "ranks": {},
    }
    for rank in timeline.ranks:
        mine = [s.phases(rank) for s in steps if rank in s.asked]
        if not mine:
            continue
        means = {phase: 1000 * float(np.mean([m[phase] for m in mine])) for phase in PHASES}
        total = sum(means.values())
        shares = {phase: value / total if total else 0.0 for phase, value in means.items()}
        # The percents the table shows and the notebook's sentences quote: one figure for both.
        percents = whole_percents(list(shares.values()), digits=PERCENT_DIGITS)
        result["ranks"][rank] = {
            **{f"{phase}_ms": value for phase, value in means.items()},
            "step_ms": total,
            **{f"{phase}_share": share for phase, share in shares.items()},
            **{f"{phase}_percent": percent for phase, percent in zip(PHASES, percents)},
        }
    return result


def summary_table(timeline: Timeline):
    """summary()'s phases per rank as a pandas DataFrame: milliseconds per step, and shares."""
    import pandas as pd

    ranks = summary(timeline)["ranks"]
    columns = [f"{phase}_ms" for phase in (*PHASES, "step")]
    table = pd.DataFrame.from_dict(ranks, orient="index")[columns].round(1)
    table.columns = [f"{phase} (ms)" for phase in (*PHASES, "step")]
    table.index.name = "rank"
    for phase in PHASES:
        table[f"{phase} (%)"] = pd.Series(
            {rank: values[f"{phase}_percent"] for rank, values in ranks.items()}
        )
    return table


# Percents to a tenth: 1.5 ms of a 40.8 ms step is 3.7%, which a whole percent would show as 3
# or 4 depending on how the others round.
PERCENT_DIGITS = 1


def whole_percents(shares: list, digits: int = 0) -> list:
    """Shares that add up to 1 as percents to `digits` decimals that add up to 100 (largest
    remainders get the units rounding down leaves over): [0.333, 0.333, 0.334] gives
    [33, 33, 34], and with digits=1 [33.3, 33.3, 33.4]."""
    total = sum(shares)
    if not total:
        return [0 for _ in shares]
    scale = 10**digits
    exact = [100 * scale * share / total for share in shares]
    whole = [int(value) for value in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: exact[i] - whole[i], reverse=True)
    for index in by_remainder[: 100 * scale - sum(whole)]:
        whole[index] += 1
    return whole if digits == 0 else [round(value / scale, digits) for value in whole]


def plot_steps(timeline: Timeline, axes=None):
    """Per rank (one panel each) and per step, stacked bars: compute, waiting, allreduce (ms).
    Steps during which other Horovod work went on (the broadcast after the first step, the
    metric averaging at the end of an epoch) are drawn faded: their compute holds that work."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    steps, ranks = timeline.steps(), timeline.ranks
    if not steps:
        raise TimelineError(
            "no two training steps with allreduced gradients in this timeline: a run of one "
            "worker allreduces none, and the script must use hvd.DistributedOptimizer"
        )
    if axes is None:
        _, axes = plt.subplots(
            len(ranks),
            1,
            figsize=(10, 2.2 * len(ranks) + 0.6),
            sharex=True,
            sharey=True,
            squeeze=False,
        )
        axes = axes[:, 0]
    numbers = [s.number for s in steps]
    plain = [s for s in steps if not s.other_work]
    top = 1000 * max(s.seconds for s in plain or steps) * 1.35  # room for the legend
    for ax, rank in zip(axes, ranks):
        bottom = np.zeros(len(steps))
        for phase in PHASES:
            values = np.array(
                [1000 * s.phases(rank)[phase] if rank in s.asked else 0.0 for s in steps]
            )
            colors = [COLORS[phase] + ("55" if s.other_work else "") for s in steps]
            ax.bar(numbers, values, bottom=bottom, color=colors, width=0.9)
            bottom += values
        ax.set_ylabel(f"rank {rank}\nms")
        ax.set_ylim(0, top)  # the faded steps may go off the top: their compute is not a step's
        ax.grid(axis="y", alpha=0.3)
    legend = [Patch(color=COLORS[phase], label=phase) for phase in PHASES]
    legend.append(Patch(color=COLORS["compute"] + "55", label="step with other Horovod work"))
    axes[0].legend(handles=legend, loc="upper right", ncol=4, fontsize="small")
    axes[0].set_title("Where each step's time went, per rank (Horovod timeline)")
    axes[-1].set_xlabel("training step")
    return axes
