"""Runs one script of the step chain as `__main__` and records what each worker did.

    horovodrun --gloo -np 2 -H localhost:2 python tests/helpers/run_chain_file.py \\
        OUT_DIR SCRIPT [SCRIPT OPTIONS...]

The script runs unchanged (no test-only options). Per worker (rank from HOROVOD_RANK, 0 if
unset) this writes to OUT_DIR:

- `rank<R>.started.json` at start: {"rank", "pid"};
- `rank<R>.saves.jsonl`: one line per `Model.save` call (checkpoints), written when the save
  has finished: {"rank", "pid", "path"};
- `rank<R>.json` when the script has finished: {"rank", "pid", "resume_from_epoch",
  "weights_sha256"} (the sha256 of the model's trainable weights).

Saves are serialized across the workers with a lock file in OUT_DIR. Before step 9 every worker
writes the same checkpoint-{epoch}.h5 at the same moment, and HDF5 then fails at random
("unable to lock file"): that is what step 9 fixes, but here it would only make the tests flaky.
The lock keeps "both workers write" observable without the race.
"""

import fcntl
import hashlib
import json
import os
import runpy
import sys
from pathlib import Path


def main():
    out_dir, script, *script_args = sys.argv[1:]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rank = int(os.environ.get("HOROVOD_RANK", "0"))
    me = {"rank": rank, "pid": os.getpid()}
    (out_dir / f"rank{rank}.started.json").write_text(json.dumps(me))

    import tensorflow as tf

    original_save = tf.keras.Model.save

    def recording_save(model, filepath, *args, **kwargs):
        with open(out_dir / "save.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            result = original_save(model, filepath, *args, **kwargs)
        with open(out_dir / f"rank{rank}.saves.jsonl", "a") as log:
            log.write(json.dumps({**me, "path": str(filepath)}) + "\n")
        return result

    tf.keras.Model.save = recording_save

    sys.argv = [script, *script_args]
    namespace = runpy.run_path(script, run_name="__main__")

    weights = hashlib.sha256()
    for variable in namespace["model"].trainable_weights:
        weights.update(variable.numpy().tobytes())
    record = {
        **me,
        "resume_from_epoch": int(namespace["resume_from_epoch"]),
        "weights_sha256": weights.hexdigest(),
    }
    (out_dir / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
