"""The solution trains for real on 2 workers (make check's one real 2-worker run of the chain).

It runs as the runner cell starts it (workbook.runner's plan_run and execute: `horovodrun --gloo
-np 2`, one thread per worker on 2 cores) with a tiny model and a few steps per epoch, through
tests/helpers/run_chain_file.py, which records per worker the trainable weights' sha256, the
checkpoints it saved and the epoch it resumed from. Every other script of the chain:
tests/system/test_training_runs.py.
"""

import json
import re
from pathlib import Path

import pytest

from authoring import chain as step_chain
from workbook.facts import results

from chain_runs import needs_horovodrun, needs_sample, recorded, records, run, script


def checkpoint_ranks(out_dir):
    ranks = set()
    for path in out_dir.glob("rank*.saves.jsonl"):
        ranks |= {json.loads(line)["rank"] for line in path.read_text().splitlines()}
    return ranks


def event_file_ranks(log_dir, records_by_rank):
    rank_of_pid = {record["pid"]: rank for rank, record in records_by_rank.items()}
    ranks = set()
    for path in Path(log_dir).rglob("events.out.tfevents.*"):
        pid = int(re.search(r"\.(\d+)\.\d+\.v2$", path.name).group(1))
        assert pid in rank_of_pid, f"{path.name} was written by an unknown process"
        ranks.add(rank_of_pid[pid])
    return ranks


@needs_horovodrun
@needs_sample
# The one real 2-worker run of `make check`; the chain's other scripts: system/test_training_runs.py.
@pytest.mark.parametrize("step", [step_chain.LAST_STEP])
def test_chain_script_runs_on_two_workers(step, tmp_path):
    out_dir, log_dir = tmp_path / "record", tmp_path / "logs"
    code, output = run(recorded(script(step), out_dir, log_dir), cwd=tmp_path)
    assert code == 0, output[-5000:]
    by_rank = records(out_dir, [0, 1])

    same_weights = by_rank[0]["weights_sha256"] == by_rank[1]["weights_sha256"]
    if step >= 5:
        # Broadcast initial weights + averaged gradients: the workers train one model.
        assert same_weights, "the workers' models diverged"
    else:
        # Separate random initializations: the workers train different models (even with
        # the averaged gradients of step 4, since nothing makes them start alike).
        assert not same_weights, "the workers ended with identical weights"

    writers = {0} if step >= 9 else {0, 1}
    assert checkpoint_ranks(out_dir) == writers
    assert event_file_ranks(log_dir, by_rank) == writers

    printed = results(output)
    assert len(printed) == (1 if step >= 3 else 2), output[-3000:]
    assert all(0 <= result["test_accuracy"] <= 1 for result in printed)
    assert all(result["epochs"] == 2 for result in printed)


