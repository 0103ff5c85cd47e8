"""Record: run.json next to a run's log, the run's facts for whoever compares runs later, in any
kernel (workbook.comparison reads it). Written when the run starts, completed when it ends."""

from __future__ import annotations

import json

from workbook.runner.command import RunPlan
from workbook.runner.contention import ContentionMonitor
from workbook.runner.display import RunResult


def write_record(plan: RunPlan, started_at: float, monitor: ContentionMonitor,
                 result: RunResult | None = None) -> None:
    """run.json: the plan's facts and the start; with the result, also how and when it ended
    and what the other processes took meanwhile."""
    layout = plan.layout
    record = {
        "run_name": plan.run_name,
        "command": plan.display_command,
        "launcher": plan.launcher,
        "layout": layout.describe(),
        "workers": layout.workers,
        "threads_per_worker": layout.threads,
        "cores": layout.cores,
        "gpus": layout.gpus,
        "pinned": layout.pinned,
        "hosts": plan.hosts,
        "started": started_at,
        "timeline": str(plan.timeline_path) if plan.timeline_path else None,
    }
    if result is not None:
        record.update(
            ended=result.ended_at,
            exit_code=result.exit_code,
            ok=result.ok,
            busy_others=result.busy_others,
            contention=monitor.record(),
        )
    plan.record_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
