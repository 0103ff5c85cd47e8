"""grader/running/run_check.py releases a run's box whatever fails: preparing the run, launching it,
reading what it left, or cleaning up; each failure is that run's result ("not run", saying
why), never an exception for the caller, and nothing of the run is left behind. The failures
are injected (no process starts here); the real box's release: tests/system/test_sandbox.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from grader.running import run_check as run_module
from grader.running.outcome import NOT_RUN
from workbook.facts import LAST_STEP, SOLUTION_FILE_NAME
from workbook.paths import SOLUTIONS_DIR


class FakeBox:
    """Stands in for grader.running.sandbox.Sandbox: records what the run asked of it."""

    def __init__(self, failing_close: bool = False):
        self.calls, self.failing_close = [], failing_close

    def with_folders(self, writable=(), readable=()):
        self.calls.append("with_folders")
        return self

    def end_launch(self):
        self.calls.append("end_launch")

    def note(self, limit):
        self.calls.append(f"note {limit}")

    def close(self):
        self.calls.append("close")
        if self.failing_close:
            raise RuntimeError("umount failed: target is busy")


def launched(script, log_dir, launch, np, timeout, records, attempt, sandbox, say):
    """A launch that ran (no process: its result and one record)."""
    (records / "run1-rank0.json").write_text('{"run": 1, "rank": 0, "pid": 1}')
    attempt.run = SimpleNamespace(
        wall_seconds=1.0, log_path=log_dir / "horovodrun.log", ok=True, timed_out=False
    )


def fail(error):
    def raising(*args, **kwargs):
        raise error

    return raising


@pytest.mark.parametrize(
    "stage, patch, said",
    [
        (
            "prepare",
            {"write_keyed_data": fail(OSError(28, "No space left on device"))},
            "No space left on device",
        ),
        ("launch", {"_run_watched": fail(RuntimeError("no horovodrun here"))}, "no horovodrun"),
        (
            "read",
            {
                "_run_watched": launched,
                "keep_run": fail(RecursionError("maximum recursion depth exceeded")),
            },
            "the run's records could not be read: RecursionError",
        ),
        ("clean-up", {"_run_watched": launched}, "umount failed"),
    ],
)
def test_a_failure_at_any_stage_is_the_runs_result_and_releases_its_box(
    stage, patch, said, monkeypatch, tmp_path
):
    for name, value in patch.items():
        monkeypatch.setattr(run_module, name, value)
    box = FakeBox(failing_close=stage == "clean-up")
    result = run_module.run_step(
        LAST_STEP, SOLUTIONS_DIR / SOLUTION_FILE_NAME, work_dir=tmp_path, quiet=True, sandbox=box
    )
    assert result.run.outcome == NOT_RUN and said in result.message, result.message
    assert box.calls.count("close") == 1, box.calls  # released once, whatever failed
    assert list(tmp_path.iterdir()) == []  # nothing of the run is left
