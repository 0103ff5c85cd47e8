"""Horovod's timeline, read per step and per rank, and drawn.

Event lists in the format Horovod 0.28.1 writes (checked against real timelines: per tensor a
NEGOTIATE_ALLREDUCE with an instant event per rank, then ALLREDUCE with GLOO_ALLREDUCE inside,
its end carrying the shape). Real timelines: tests/system/test_timeline_runs.py.
"""

from __future__ import annotations

import json

import pytest

from workbook.timeline import (
    TimelineError,
    parse_events,
    plot_steps,
    read_timeline,
    summary,
    summary_table,
    whole_percents,
)

GRADIENTS = [
    "PartitionedCall/DistributedSGD_Allreduce/cond/then/_1/HorovodAllreduce_grads_0",
    "PartitionedCall/DistributedSGD_Allreduce/cond_1/then/_2/HorovodAllreduce_grads_1_0",
]


class Trace:
    """Builds a Chrome trace as Horovod does: a process per tensor, times in microseconds."""

    def __init__(self):
        self.events = [
            {
                "name": "process_name",
                "ph": "M",
                "pid": 0,
                "args": {"start_time_since_epoch_in_micros": 1_800_000_000_000_000},
            }
        ]
        self.pids = {}

    def pid(self, tensor: str) -> int:
        if tensor not in self.pids:
            self.pids[tensor] = len(self.pids) + 1
            self.events.append(
                {
                    "name": "process_name",
                    "ph": "M",
                    "pid": self.pids[tensor],
                    "args": {"name": tensor},
                }
            )
        return self.pids[tensor]

    def collective(
        self,
        tensor,
        asked: dict,
        reduced: tuple,
        kind="ALLREDUCE",
        shape="[64, 10]",
        ranks_marked=True,
    ):
        """asked: {rank: ms}; reduced: (start ms, end ms)."""
        pid, us = self.pid(tensor), lambda ms: int(ms * 1000)
        self.events.append(
            {"ph": "B", "name": f"NEGOTIATE_{kind}", "ts": us(min(asked.values())), "pid": pid}
        )
        if ranks_marked:
            for rank, ms in sorted(asked.items(), key=lambda item: item[1]):
                self.events.append(
                    {"ph": "X", "name": str(rank), "ts": us(ms), "pid": pid, "dur": 0}
                )
        self.events.append({"ph": "E", "ts": us(max(asked.values())), "pid": pid})
        start, end = reduced
        self.events += [
            {"ph": "B", "name": kind, "ts": us(start), "pid": pid},
            {"ph": "B", "name": f"GLOO_{kind}", "ts": us(start) + 5, "pid": pid},
            {"ph": "E", "ts": us(end) - 5, "pid": pid},
            {"ph": "E", "ts": us(end), "pid": pid, "args": {"dtype": "float32", "shape": shape}},
        ]

    def step(self, asked: list[dict], reduced: list[tuple], **options):
        for tensor, ask, red in zip(GRADIENTS, asked, reduced):
            self.collective(tensor, ask, red, **options)


def four_steps() -> Trace:
    trace = Trace()
    trace.step([{0: 10, 1: 12}, {0: 11, 1: 12}], [(12, 14), (12, 14)])  # step 1: builds the graph
    trace.collective("HorovodBroadcast_w_0", {0: 15, 1: 15}, (16, 17), kind="BROADCAST")
    trace.step([{0: 30, 1: 40}, {0: 32, 1: 45}], [(40, 44), (45, 50)])  # after the broadcast
    # Step 3, plain: rank 0 finishes its backward pass at 70 ms, rank 1 at 58 ms.
    trace.step([{0: 60, 1: 55}, {0: 70, 1: 58}], [(60, 62), (70, 74)])
    trace.collective("HorovodAllreduce", {0: 78, 1: 79}, (79, 80), shape="[]")  # metrics
    trace.step([{0: 90, 1: 91}, {0: 95, 1: 96}], [(91, 93), (96, 99)])  # after an epoch's end
    return trace


def test_steps_and_phases_per_rank():
    timeline = parse_events(four_steps().events)
    assert timeline.ranks == [0, 1] and timeline.started_at == 1_800_000_000.0
    assert len(timeline.gradients()) == 8  # 2 tensors x 4 steps, no broadcast, no metrics
    steps = timeline.steps()
    assert [s.number for s in steps] == [2, 3, 4]  # the first has no previous step
    assert [s.other_work for s in steps] == [True, False, True]
    plain = steps[1]
    assert (plain.begin, plain.agreed, plain.done) == pytest.approx((0.050, 0.070, 0.074))
    assert plain.phases(0) == pytest.approx({"compute": 0.020, "waiting": 0.0, "allreduce": 0.004})
    assert plain.phases(1) == pytest.approx(
        {"compute": 0.008, "waiting": 0.012, "allreduce": 0.004}
    )
    for rank in (0, 1):
        assert sum(plain.phases(rank).values()) == pytest.approx(plain.seconds)


def test_summary_leaves_out_steps_with_other_work():
    found = summary(parse_events(four_steps().events))
    assert (found["steps"], found["left_out"]) == (1, 3)
    assert found["gradient_megabytes"] == pytest.approx(2 * 64 * 10 * 4 / 1e6)
    rank1 = found["ranks"][1]
    assert (rank1["compute_ms"], rank1["waiting_ms"], rank1["allreduce_ms"]) == pytest.approx(
        (8, 12, 4)
    )
    assert rank1["waiting_share"] == pytest.approx(0.5)


def test_the_table_shows_percents_to_a_tenth_that_add_up_to_100():
    timeline = parse_events(four_steps().events)
    table = summary_table(timeline)
    percents = table[["compute (%)", "waiting (%)", "allreduce (%)"]]
    assert percents.loc[0].tolist() == [83.3, 0.0, 16.7]  # 20, 0 and 4 ms of a 24 ms step
    assert percents.loc[1].tolist() == [33.3, 50.0, 16.7]  # 8, 12 and 4 ms
    assert all(sum(row) == pytest.approx(100) for row in percents.to_numpy())
    # The figures the where_does_the_time_go notebook's sentences quote are the table's.
    ranks = summary(timeline)["ranks"]
    assert [
        ranks[1][f"{phase}_percent"] for phase in ("compute", "waiting", "allreduce")
    ] == percents.loc[1].tolist()
    # Issue 31: 1.5 ms of a 40.8 ms step, the table said 3 and the text 4%; now both 3.7.
    assert whole_percents([39.3 / 40.8, 1.5 / 40.8, 0.0], digits=1)[1] == 3.7
    assert whole_percents([0.333, 0.333, 0.334]) == [33, 33, 34]
    assert whole_percents([0.907, 0.046, 0.047]) == [91, 4, 5]  # rounding alone gives 101
    assert whole_percents([0.0, 0.0]) == [0, 0]


def test_the_plot_has_a_panel_per_rank_and_a_bar_per_step_and_phase():
    import matplotlib

    matplotlib.use("Agg")
    axes = plot_steps(parse_events(four_steps().events))
    assert len(axes) == 2
    for ax in axes:
        assert len(ax.patches) == 3 * 3  # 3 steps x compute, waiting, allreduce
    heights = [p.get_height() for p in axes[1].patches]
    # Rank 1 in step 3: compute 8 ms, waiting 12 ms, allreduce 4 ms (bars by phase, then step).
    assert [heights[1], heights[4], heights[7]] == pytest.approx([8.0, 12.0, 4.0])
    assert [t.get_text() for t in axes[0].get_legend().get_texts()][:3] == [
        "compute",
        "waiting",
        "allreduce",
    ]


def test_a_file_cut_short_is_read(tmp_path):
    path = tmp_path / "timeline.json"
    text = "[\n" + ",\n".join(json.dumps(e) for e in four_steps().events) + ","
    path.write_text(text)  # as Horovod leaves it while the run goes on
    assert len(read_timeline(path).steps()) == 3


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no timeline at"),
        ("", "is empty"),
        ("{not json", "not a Chrome trace"),
        ('{"a": 1}', "a list of events was expected"),
    ],
)
def test_unreadable_timelines_say_why(tmp_path, content, message):
    path = tmp_path / "timeline.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(TimelineError, match=message):
        read_timeline(path)


def test_a_timeline_with_the_response_cache_on_says_how_to_record_it():
    trace = Trace()
    trace.step([{0: 10, 1: 12}] * 2, [(12, 14)] * 2)
    trace.step([{0: 30, 1: 40}] * 2, [(40, 44)] * 2, ranks_marked=False)  # cached: no marks
    with pytest.raises(TimelineError, match="HOROVOD_CACHE_CAPACITY=0"):
        parse_events(trace.events).steps()


def test_one_worker_has_no_gradients_to_draw():
    trace = Trace()
    trace.collective("HorovodAllreduce", {0: 1}, (1, 2), shape="[]")
    with pytest.raises(TimelineError, match="a run of one worker allreduces none"):
        plot_steps(parse_events(trace.events))
