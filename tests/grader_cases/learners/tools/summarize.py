"""Summarizes a run_case.sh output: per rank, what it printed and what the probe saw."""

import json
import re
import sys
from collections import defaultdict

PREFIX = re.compile(r"^\[(?:\d+,)?(\d+)\]<(stdout|stderr)>:(.*)$")
NOISE = re.compile(r"tensorflow/core|cpu_feature_guard|To enable the following|oneDNN|"
                   r"absl::InitializeLog|rebuild TensorFlow|saving_api|HDF5 file via|"
                   r"TensorFlow Addons|tensorflow_addons|warnings.warn|Callback method|"
                   r"Check your callbacks|ETA:|TFA has entered|TensorFlow Addons \(TFA\)|"
                   r"^\s*$|For more information see|github.com/tensorflow/addons|"
                   r"minimal maintenance|tfa-has-ended|the TFA|Keras 3|deprecated")


def main(path):
    printed = defaultdict(list)
    probes = defaultdict(list)
    tail = []
    for raw in open(path, errors="replace"):
        raw = raw.rstrip("\n")
        for piece in re.split(r"(?=\[(?:\d+,)?\d+\]<std)", raw):
            m = PREFIX.match(piece)
            if not m:
                if piece.startswith(("EXIT", "FILES")) or "rror" in piece:
                    tail.append(piece[:200])
                continue
            rank, stream, text = int(m.group(1)), m.group(2), m.group(3)
            if text.startswith("PROBE "):
                probes[rank].append(json.loads(text[6:]))
            elif not NOISE.search(text):
                printed[rank].append(("E " if stream == "stderr" else "") + text[:160])
    for rank in sorted(set(printed) | set(probes)):
        print(f"===== rank {rank}")
        lines = printed[rank]
        keep = [l for l in lines if not re.match(r"^\d+/\d+ \[", l)]
        bars = [l for l in lines if re.match(r"^\d+/\d+ \[", l)]
        print(f"  printed {len(lines)} lines ({len(bars)} progress-bar lines), e.g.:")
        for line in keep[:14]:
            print("   |", line)
        if len(keep) > 14:
            print("   | ...", len(keep) - 14, "more; last:", keep[-1])
        for p in probes[rank]:
            kind = p.pop("kind")
            p.pop("rank")
            if kind == "epoch":
                lrs = p["batch_lrs"]
                brief = lrs if len(lrs) <= 6 else lrs[:3] + ["..."] + lrs[-2:]
                print(f"  epoch {p['epoch']}: lrs {brief} end_lr {p['end_lr']} loss {p['loss']}")
            elif kind in ("raw_logs", "callback_saw"):
                name = p.get("callback", "RAW")
                print(f"  {kind} {name} e{p['epoch']} loss={p['loss']}")
            elif kind == "keyed":
                tr, va = p["train"], p["validation"]
                print(f"  keyed train n={len(tr) if tr else None} uniq={len(set(tr)) if tr else None} "
                      f"val n={len(va) if va else None} uniq={len(set(va)) if va else None}")
                print("   KEYS", json.dumps({"train": tr, "validation": va}))
            else:
                print(f"  {kind}: {json.dumps(p)[:400]}")
    for line in tail:
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
