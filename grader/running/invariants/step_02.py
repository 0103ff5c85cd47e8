"""Step 2's run invariant: each worker sees one GPU, its local rank's."""

from __future__ import annotations

from grader.report import CANT_TELL, FAILED, PASSED, Result
from grader.running.evidence import Evidence
from grader.running.invariants.shared import Setting, finding, not_reached, not_shown, ranks_with
from workbook.prose import plural

STEP = 2
TITLE = "one GPU per worker"  # the title of its findings
# What a run on this machine can't show (the reading decides that part, grader/decision.py).
CANT_SHOW = (
    "which GPU a worker picks when a host has workers of other ranks (on one host the rank "
    "and the local rank are equal)"
)


def check(evidence: Evidence, setting: Setting) -> Result:
    gpus = ranks_with(evidence, 1, lambda r: r.data.get("gpus"))
    states = ranks_with(evidence, 1, lambda r: r.data.get("horovod"))
    if len(gpus) < evidence.np:
        if len(ranks_with(evidence, 1, lambda r: r.fit)) == evidence.np:
            return finding(
                STEP,
                CANT_TELL,
                "can't tell: this machine has GPUs of its own, and the "
                "check only simulates them where there are none",
            )
        return not_shown(STEP, not_reached(evidence, gpus, "reached model.fit"))
    count = next(iter(gpus.values()))["count"]
    seen = "; ".join(f"rank {rank} {_gpu_list(state['visible'])}" for rank, state in gpus.items())
    hint = (
        "List the GPUs with tf.config.list_physical_devices('GPU') and make one visible per "
        "worker: tf.config.set_visible_devices(gpus[hvd.local_rank()], 'GPU')."
    )
    wrong = []
    for rank, state in gpus.items():
        local = (states.get(rank) or {}).get("local_rank", rank)
        if state["visible"] != [local]:
            wrong.append(rank)
    if not wrong:
        return finding(
            STEP,
            PASSED,
            f"with {plural(count, 'GPU')} simulated per host, each worker made only "
            f"the GPU of its local rank visible ({seen})",
        )
    rank = wrong[0]
    visible = gpus[rank]["visible"]
    if not gpus[rank]["set"]:
        why = f"rank {rank} never chose a GPU, so it would use all {len(visible)}"
    elif not visible:
        why = f"rank {rank} made no GPU visible: it would train on the CPU"
    elif len(visible) > 1:
        why = f"rank {rank} kept {plural(len(visible), 'GPU')} visible"
    else:
        why = f"rank {rank} chose GPU {visible[0]}, not the GPU of its local rank"
    return finding(
        STEP, FAILED, f"with {plural(count, 'GPU')} simulated on this host: {why} ({seen})", hint
    )


def _gpu_list(visible: list) -> str:
    if not visible:
        return "no GPU"
    return ("GPU " if len(visible) == 1 else "GPUs ") + ", ".join(map(str, visible))
