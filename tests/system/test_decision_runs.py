"""The decided verdict for real (grader/decision.py): when the reading can't tell, the check cell runs
the script on 2 workers. Without runs: tests/unit/test_decision.py.
"""

from __future__ import annotations

import pytest

from grader import check_step
from grader.decision import RUN, decide
from grader.report import CANT_TELL, FAILED
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
    assert "running your script to decide" in said
    assert result.status == FAILED and result.decided_by == RUN, str(result)
    assert "the weights of rank 1 differ from rank 0's" in result.message
    assert "Decided by the run." in str(result)
