"""The run check's configuration and limits, for real (grader/running/run_check.py): the machine's load
is not the script's fault, the launches are set so no constant matches them and rank differs
from local rank, and a script's run of someone else's code earns nothing. Without a process:
tests/unit/test_run_configuration.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from grader.report import PASSED
from grader.running import run_step
from grader.running.outcome import FINISHED, UNFINISHED
from grader.running.run_check import STALL_S
from grader.running.sandbox import Sandbox
from hostile_scripts import HANGING_RESUME, RUNS_THE_SOLUTION
from runner_fixtures import needs_horovodrun
from workbook.facts import LAST_STEP, SOLUTION_FILE_NAME
from workbook.paths import SOLUTIONS_DIR

pytestmark = needs_horovodrun
NEIGHBOURS = 4  # CPU-bound processes beside the run, on this 2-core machine: a third of it left
# The limit: the run's own time under load is 25-30 s (measured at loads of 16-35, a quiet run
# takes 13-15 s), its wall time beside the neighbours about 3 times a quiet run's.
LIMIT_S = 45
NEIGHBOUR_S = 300  # each ends by itself after this long, whatever happens to the test


@pytest.fixture
def busy_machine():
    """NEIGHBOURS processes that keep a core busy each, stopped at the end."""
    loop = (
        f"import time\nend = time.monotonic() + {NEIGHBOUR_S}\nwhile time.monotonic() < end: pass"
    )
    neighbours = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(NEIGHBOURS)]
    try:
        yield neighbours
    finally:
        for neighbour in neighbours:
            neighbour.kill()
            neighbour.wait(timeout=10)


def statuses(result) -> dict:
    return {detail.step: detail.status for detail in result.details}


@pytest.mark.timeout(600)
def test_the_reference_passes_every_step_on_a_busy_machine(tmp_path, busy_machine):
    """Beside CPU-bound neighbours, with a limit the wall clock may pass: the limit counts
    what the machine gave the run. Launch 1 had two hosts (rank 1 is local rank 0) and
    simulated GPUs; launch 2 no GPU, and the script's own batch size."""
    script = tmp_path / "fashion_mnist.py"
    script.write_text((SOLUTIONS_DIR / SOLUTION_FILE_NAME).read_text())
    result = run_step(
        12, script, quiet=True, timeout=LIMIT_S, work_dir=tmp_path / "runs", keep=True
    )
    assert result.run.outcome == FINISHED, result.message
    assert set(statuses(result).values()) == {PASSED}, str(result)
    assert result.run.counted_seconds < result.run.seconds, "the neighbours' time not counted"
    records = tmp_path / "runs"
    first = [json.loads(p.read_text()) for p in sorted(records.rglob("run1-rank?.json"))]
    second = [json.loads(p.read_text()) for p in sorted(records.rglob("run2-rank?.json"))]
    assert len(first) == len(second) == 2
    assert [r["horovod"]["local_rank"] for r in first] == [0, 0]
    assert len({r["host"] for r in first}) == 1  # one machine, two host names for Horovod
    assert all(r["gpus"]["count"] == 1 for r in first) and all(r["gpus"] is None for r in second)
    assert {r["args"]["values"]["batch_size"] for r in second} == {64}  # the cpu preset's own
    assert not result.run.foreign and result.run.copy_of == f"solutions/{SOLUTION_FILE_NAME}"


@pytest.mark.timeout(400)
@pytest.mark.parametrize("boxed", [False, True], ids=["plain", "sandboxed"])
def test_a_resume_that_never_ends_is_stopped_when_it_gets_no_further(tmp_path, boxed):
    """Sandboxed too: the workers' pids in the box (their records') are not the host's, and
    the CPU their wait used is still the workers', not 'processes beside the workers'."""
    if boxed and os.geteuid() != 0:
        pytest.skip("the sandbox needs root")
    script = tmp_path / "fashion_mnist.py"
    script.write_text(HANGING_RESUME)
    os.chmod(tmp_path, 0o755)  # the sandbox's account reads the script
    with contextlib.ExitStack() as stack:
        box = stack.enter_context(Sandbox()) if boxed else None
        result = run_step(LAST_STEP, script, quiet=True, work_dir=tmp_path, sandbox=box)
    assert result.run.outcome == UNFINISHED
    assert f"no rank got any further for {STALL_S} s" in result.message
    assert "beside the workers" not in result.message, result.message
    assert result.run.counted_seconds < 120, "stopped well before the time limit"
    shown = statuses(result)
    assert shown[6] == PASSED and shown[8] != PASSED  # the first run showed its steps


@pytest.mark.timeout(400)
def test_a_script_that_runs_the_solution_earns_nothing_from_it(tmp_path):
    script = tmp_path / "fashion_mnist.py"
    script.write_text(RUNS_THE_SOLUTION)
    result = run_step(LAST_STEP, script, quiet=True, work_dir=tmp_path)
    solution = str(SOLUTIONS_DIR / SOLUTION_FILE_NAME)
    assert any(solution in entry for entry in result.run.foreign), result.run.foreign
    assert PASSED not in statuses(result).values(), str(result)
    assert f"not the script's own work: ran {solution}" in result.details[0].message
