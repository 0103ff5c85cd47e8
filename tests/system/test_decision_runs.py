"""The decided verdict for real (grader/decision.py): when the reading can't tell, the check cell runs
the script on 2 workers. Without runs: tests/unit/test_decision.py.
"""

from __future__ import annotations

import pytest

from grader import check_step, judge_file
from grader.decision import RUN, decide
from grader.report import CANT_TELL, FAILED, PASSED
from hostile_scripts import EARLY_EXIT_ON_PROBE, SELF_STARVING
from workbook.paths import REPO

SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"


@pytest.mark.timeout(400)
def test_when_the_reading_cant_tell_the_check_cell_runs_the_script(tmp_path, capsys):
    """A callback the reading can't name: the check cell's run shows it is not the broadcast."""
    text = SOLUTION.read_text(encoding="utf-8")
    broadcast = "    hvd.callbacks.BroadcastGlobalVariablesCallback(0),\n"
    assert text.count(broadcast) == 1
    script = tmp_path / "fashion_mnist.py"
    script.write_text(
        text.replace(
            broadcast,
            "    getattr(hvd.callbacks, 'ProgbarLogger', tf.keras.callbacks.ProgbarLogger)(),\n",
        )
    )
    assert check_step(5, script).status == CANT_TELL  # the reading alone: counted as done
    result = check_step(5, script, run_if_unsure=True)
    said = " ".join(capsys.readouterr().out.split())  # prose: wrapped between words
    assert "Running your script to decide" in said
    assert result.status == FAILED and result.decided_by == RUN, str(result)
    assert "the weights of rank 1 differ from rank 0's" in result.message
    assert "Decided by the run." in str(result)


@pytest.mark.timeout(600)
def test_a_crash_on_one_steps_line_is_blamed_and_the_steps_after_it_shown_by_a_swap(tmp_path):
    """Issue 37 (1): a callback class passed for an instance (step 7's line) crashes model.fit;
    step 7 fails, and the steps the crash kept the run from showing are decided by a second run
    with that one line swapped for the reference's, which says so."""
    text = SOLUTION.read_text(encoding="utf-8")
    average = "    hvd.callbacks.MetricAverageCallback(),\n"
    assert text.count(average) == 1
    script = tmp_path / "student" / "fashion_mnist.py"
    script.parent.mkdir()
    script.write_text(text.replace(average, "    hvd.callbacks.MetricAverageCallback,\n"))
    line = text[: text.index(average)].count("\n") + 1
    judged = {result.step: result for result in judge_file(script, work_dir=tmp_path / "work")}
    assert judged[7].status == FAILED and judged[7].decided_by == RUN, str(judged[7])
    assert "passed as a class" in judged[7].message
    swapped = [step for step, result in judged.items() if "shown by a second run" in result.message]
    assert swapped and 7 not in swapped and set(swapped) >= {8, 9, 10, 11}, judged
    for step in swapped:
        assert judged[step].status == PASSED and judged[step].decided_by == RUN, str(judged[step])
        assert f"with step 7's line {line} swapped for the reference's `hvd" in judged[step].message


def credited(judged) -> dict:
    """{step: who decided} of the steps that earn their point."""
    return {result.step: result.decided_by for result in judged if result.status == PASSED}


@pytest.mark.timeout(400)
def test_a_script_that_leaves_when_it_sees_the_probe_earns_nothing(tmp_path):
    """Issue 37 (1): the finished script that exits at once under the run check. The reading
    would pass every step; no run showed one, so none is credited, and each says why."""
    script = tmp_path / "fashion_mnist.py"
    script.write_text(EARLY_EXIT_ON_PROBE)
    judged = judge_file(script, work_dir=tmp_path / "work")
    assert credited(judged) == {}, [str(result) for result in judged]
    assert {result.decided_by for result in judged} == {RUN}
    assert all("not credited" in result.message for result in judged), judged[0].message


@pytest.mark.timeout(600)
def test_a_script_that_starves_its_own_run_earns_only_what_the_run_showed(tmp_path):
    """Issue 37 (1, 2): the finished script forks busy loops beside its workers. Their CPU time
    is the script's, not the machine's: the run is not re-run as the machine's fault, and no
    step is credited by the reading (what the run showed before its limits, it earns)."""
    script = tmp_path / "fashion_mnist.py"
    script.write_text(SELF_STARVING)
    judged = judge_file(script, work_dir=tmp_path / "work")
    assert set(credited(judged).values()) <= {RUN}, [str(result) for result in judged]
    assert not judged.run.reruns, judged.run.reruns


@pytest.mark.timeout(600)
def test_a_crash_on_a_value_a_step_made_is_blamed_on_that_step_and_swapped_where_it_was_made(
    tmp_path,
):
    """Issue 37 (3): the resume epoch left a tensor (step 8's line) crashes the RESULT line's
    json.dumps, a line no step owns: step 8 fails, and its line, not the print, is swapped."""
    text = SOLUTION.read_text(encoding="utf-8")
    made = 'int(hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch"))'
    assert text.count(made) == 1
    script = tmp_path / "student" / "fashion_mnist.py"
    script.parent.mkdir()
    script.write_text(text.replace(made, made[4:-1]))
    line = text[: text.index(made)].count("\n") + 1
    judged = {result.step: result for result in judge_file(script, work_dir=tmp_path / "work")}
    assert judged[8].status == FAILED and judged[8].decided_by == RUN, str(judged[8])
    assert "EagerTensor is not JSON serializable" in judged[8].message
    assert judged[3].status == PASSED, str(judged[3])
    assert f"with step 8's line {line} swapped for the reference's" in judged[3].message
