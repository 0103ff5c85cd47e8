"""The solution trains for real on 2 workers (make check's one real 2-worker run of the chain).

It runs as the runner cell starts it (workbook.runner's plan_run and execute: `horovodrun --gloo
-np 2`, one thread per worker on 2 cores) with a tiny model and a few steps per epoch, through
tests/helpers/run_chain_file.py, which records per worker the trainable weights' sha256, the
checkpoints it saved and the epoch it resumed from. Every other script of the chain:
tests/system/test_training_runs.py.
"""

import pytest

from authoring import chain as step_chain
from chain_runs import needs_horovodrun, needs_sample, trains_on_two_workers


@needs_horovodrun
@needs_sample
# The one real 2-worker run of `make check`; the chain's other scripts: system/test_training_runs.py.
@pytest.mark.parametrize("step", [step_chain.LAST_STEP])
def test_chain_script_runs_on_two_workers(step, tmp_path):
    trains_on_two_workers(step, tmp_path)
