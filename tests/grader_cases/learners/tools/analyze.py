"""One compact block per corpus script from run_batch.sh's two outputs (run 1: 3 epochs on keyed
data; run 2: --epochs 4 in the same log dir), for establishing truth.json.

    python tests/grader_cases/learners/tools/analyze.py NAME.py [...]   (RUNS=/tmp/runs)
"""

import json
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(__file__))
from summarize import NOISE, PREFIX  # noqa: E402

RUNS = os.environ.get("RUNS", "/tmp/runs")


def parse(path):
    printed, probes, tail = defaultdict(list), defaultdict(list), []
    pending = {}
    if not os.path.exists(path):
        return None
    for raw in open(path, errors="replace"):
        raw = raw.rstrip("\n")
        for piece in re.split(r"(?=\[(?:\d+,)?\d+\]<std)", raw):
            m = PREFIX.match(piece)
            if not m:
                if piece.startswith(("EXIT", "FILES", "HANG")):
                    tail.append(piece)
                continue
            rank, stream, text = int(m.group(1)), m.group(2), m.group(3)
            if pending.get(rank) is not None and stream == "stdout":
                # mpirun cut a long PROBE line: its rest follows under the same prefix
                pending[rank] += text
                try:
                    probes[rank].append(json.loads(pending[rank]))
                    pending[rank] = None
                except ValueError:
                    pass
                continue
            if text.startswith("PROBE "):
                try:
                    probes[rank].append(json.loads(text[6:]))
                except ValueError:
                    pending[rank] = text[6:]
            elif not NOISE.search(text) and not re.match(r"^\d+/\d+ \[", text):
                printed[rank].append((stream, text))
    return printed, probes, tail


def first(probes, kind):
    return next((p for p in probes if p["kind"] == kind), None)


def every(probes, kind):
    return [p for p in probes if p["kind"] == kind]


def describe(run, label):
    if run is None:
        print(f"  [{label}] no output")
        return
    printed, probes, tail = run
    print(f"  [{label}] {' | '.join(t[:120] for t in tail)}")
    for rank in (0, 1):
        p = probes.get(rank, [])
        out = [t for s, t in printed.get(rank, []) if s == "stdout"]
        errs = [t for s, t in printed.get(rank, []) if s == "stderr" and re.search(r"Error|error:|Exception", t)]
        fit = first(p, "fit")
        line = f"   r{rank}: stdout {len(out)} lines"
        if out:
            kinds = sorted({re.sub(r"[\d.]+", "#", t.replace("\x08", ""))[:40] for t in out if t.replace("\x08", "").strip()})[:8]
            line += f" {kinds}"
        print(line)
        if errs:
            print(f"      ERR {errs[-1][:200]}")
        gpu = every(p, "set_visible_devices")
        if gpu:
            print(f"      visible GPU {[g['gpus'] for g in gpu]}")
        shards = every(p, "shard")
        if shards:
            print(f"      shard {[(s['num_shards'], s['index'], 'batched' if 'None' in s['element_spec'].split(',')[0] else 'elements') for s in shards]}")
        bc = every(p, "broadcast")
        if bc:
            print(f"      broadcast {[(b.get('sent'), b.get('got')) for b in bc]}")
        for lm in every(p, "load_model"):
            print(f"      load_model {lm['how']} {os.path.basename(str(lm['path']))} {lm.get('custom_optimizers', '')}")
        if fit:
            print(f"      fit epochs={fit['epochs']} initial={fit['initial_epoch']} steps={fit['steps_per_epoch']} "
                  f"val_steps={fit['validation_steps']} verbose={fit['verbose']} opt={fit['optimizer']} lr0={fit['initial_lr']:.6g}")
            print(f"      callbacks {fit['callbacks']}")
        for e in every(p, "epoch"):
            lrs = [round(x, 7) for x in e["batch_lrs"]]
            print(f"      epoch {e['epoch']} lrs {lrs} end {e['end_lr']:.6g}")
        saw = every(p, "callback_saw")
        raw = {r["epoch"]: r["loss"] for r in every(p, "raw_logs")}
        if saw:
            by = defaultdict(list)
            for s in saw:
                by[s["callback"]].append("own" if abs(s["loss"] - raw.get(s["epoch"], -1)) < 1e-6 else "not-own")
            print(f"      callbacks saw loss: {dict(by)}")
        keyed = first(p, "keyed")
        if keyed and keyed["train"]:
            print(f"      keyed train n={len(keyed['train'])} uniq={len(set(keyed['train']))}"
                  f" val n={len(keyed['validation'] or [])} uniq={len(set(keyed['validation'] or []))}")
        for kind in ("after_first_batch", "train_end"):
            w = first(p, kind)
            if w:
                print(f"      {kind} {w['weights']}")
        opt = first(p, "optimizer")
        if opt:
            print(f"      optimizer {opt.get('optimizer')} allreduce={opt.get('allreduce_of_rank_plus_1', opt.get('allreduce_error', '-'))}")
        for err in every(p, "script_error") + every(p, "fit_error"):
            print(f"      SCRIPT ERROR {err['error'][:200]}")
        if not first(p, "done"):
            print("      (no 'done': the script did not finish on this rank)")
    # cross-rank
    k0, k1 = first(probes.get(0, []), "keyed"), first(probes.get(1, []), "keyed")
    if k0 and k1 and k0["train"] and k1["train"]:
        ov = len(set(k0["train"]) & set(k1["train"]))
        vo = len(set(k0["validation"] or []) & set(k1["validation"] or []))
        print(f"   cross: train overlap {ov} images, union {len(set(k0['train']) | set(k1['train']))}; "
              f"validation overlap {vo}, union {len(set(k0['validation'] or []) | set(k1['validation'] or []))}")
    for kind in ("after_first_batch", "train_end"):
        a, b = first(probes.get(0, []), kind), first(probes.get(1, []), kind)
        if a and b:
            print(f"   cross: {kind} weights {'IDENTICAL' if a['weights'] == b['weights'] else 'DIFFER'}")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        stem = name[:-3] if name.endswith(".py") else name
        print(f"##### {stem}")
        describe(parse(f"{RUNS}/{stem}.1.log"), "run1")
        describe(parse(f"{RUNS}/{stem}.2.log"), "run2")
