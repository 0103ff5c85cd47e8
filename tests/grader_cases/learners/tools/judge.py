"""First reading of the runs of a corpus script, step by step, against what the reference does
on the same runs (run_batch.sh settings: 2 workers, 512 keyed images, batches of 64, 3 epochs,
warmup 1 epoch, x0.1 from epoch 2; run 2: --epochs 4 in the same log dir). Prints, for each
step, the observation and a proposed true/false; truth.json is written from these after review.

    python tests/grader_cases/learners/tools/judge.py NAME.py [...]
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from analyze import RUNS, every, first, parse  # noqa: E402

from workbook.facts import LAST_STEP  # noqa: E402

RAMP = [0.0078125, 0.009375, 0.0109375, 0.0125]  # warmup epoch of the reference (NovoGrad, 2 workers)


def close(a, b, tol=1e-6):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


def judge(name):
    stem = name[:-3]
    run1 = parse(f"{RUNS}/{stem}.1.log")
    run2 = parse(f"{RUNS}/{stem}.2.log")
    out = {}
    if run1 is None:
        return {"error": "no run"}
    printed, probes, tail = run1
    p0, p1 = probes.get(0, []), probes.get(1, [])
    f0, f1 = first(p0, "fit"), first(p1, "fit")
    done = bool(first(p0, "done")) and bool(first(p1, "done"))
    errors = [e["error"] for r in (p0, p1) for e in every(r, "script_error")]
    out["run1"] = f"{tail[0] if tail else '?'}; finished on both ranks: {done}; errors: {errors[:1]}"
    # 1
    hv = [f.get("horovod") if f else None for f in (f0, f1)]
    out["1"] = f"at fit: [rank, size, local_rank] = {hv}" if any(hv) else f"fit reached: {bool(f0)}, {bool(f1)}"
    # 2
    g = [[x["gpus"] for x in every(r, "set_visible_devices")] for r in (p0, p1)]
    out["2"] = f"with 2 fake GPUs, visible per rank: {g}"
    # 3
    hosts = parse(f"{RUNS}/{stem}.hosts.log")
    if hosts is not None:
        hp = hosts[1]
        hg = [[x["gpus"] for x in every(hp.get(r, []), "set_visible_devices")] for r in (0, 1)]
        herr = [e["error"][:60] for r in (0, 1) for e in every(hp.get(r, []), "script_error")]
        hdone = all(first(hp.get(r, []), "done") for r in (0, 1))
        hok = hg == [[["/physical_device:GPU:0"]], [["/physical_device:GPU:0"]]] and hdone
        v[2] = (v[2][0] and hok, v[2][1] + f"; as on 2 hosts with 1 GPU each (local rank 0 on both): rank 0 kept {hg[0]}, "
                f"rank 1 {hg[1]}" + (f", errors {herr}" if herr else ", both finished"))
    so = [len([t for s, t in printed.get(r, []) if s == "stdout" and t.replace(chr(8), '').strip()]) for r in (0, 1)]
    vb = [f["verbose"] if f else None for f in (f0, f1)]
    cb1 = f1["callbacks"] if f1 else None
    out["3"] = f"stdout lines rank0/rank1: {so}; fit verbose {vb}; rank 1 callbacks {cb1}"
    # 4 / 5
    o = [first(r, "optimizer") for r in (p0, p1)]
    ar = [x.get("allreduce_of_rank_plus_1") if x else None for x in o]
    w1 = [first(r, "after_first_batch") for r in (p0, p1)]
    we = [first(r, "train_end") for r in (p0, p1)]
    same1 = w1[0] and w1[1] and w1[0]["weights"] == w1[1]["weights"]
    samee = we[0] and we[1] and we[0]["weights"] == we[1]["weights"]
    out["4"] = f"optimizer {[x.get('optimizer') if x else None for x in o]}, its allreduce of rank+1: {ar}; weights equal at the end: {samee}"
    out["5"] = f"weights equal after the first batch: {same1}; at the end: {samee}"
    # 6
    k = [first(r, "keyed") for r in (p0, p1)]
    if k[0] and k[1] and k[0]["train"] and k[1]["train"]:
        t0, t1 = set(k[0]["train"]), set(k[1]["train"])
        v0, v1 = set(k[0]["validation"] or []), set(k[1]["validation"] or [])
        out["6"] = (f"epoch 1 images per rank {len(k[0]['train'])}/{len(k[1]['train'])} (distinct {len(t0)}/{len(t1)}), "
                    f"shared by the ranks {len(t0 & t1)}, union {len(t0 | t1)} of 512; validation per rank "
                    f"{len(k[0]['validation'] or [])}/{len(k[1]['validation'] or [])}, shared {len(v0 & v1)}, union {len(v0 | v1)} of 128; "
                    f"steps {f0['steps_per_epoch']}, validation steps {f0['validation_steps']}, epochs {f0['epochs']}; "
                    f"Throughput {[c for c in f0['callbacks'] if 'images_per_step' in c]}")
    elif f0:
        out["6"] = f"steps {f0['steps_per_epoch']}, validation steps {f0['validation_steps']}, epochs {f0['epochs']}"
    # 7
    saw = {}
    for r, p in ((0, p0), (1, p1)):
        raw = {x["epoch"]: x["loss"] for x in every(p, "raw_logs")}
        for s in every(p, "callback_saw"):
            own = abs(s["loss"] - raw.get(s["epoch"], -1)) < 1e-6
            saw.setdefault(f"r{r}:{s['callback']}", set()).add("own loss" if own else "averaged")
    out["7"] = f"loss the callbacks saw: { {k_: sorted(v) for k_, v in saw.items()} }; rank 0 callbacks {f0['callbacks'] if f0 else None}"
    # 9
    out["9"] = f"files after run 1: {tail[1][6:200] if len(tail) > 1 else '?'}"
    # 10 / 11 / 12
    lrs = {e["epoch"]: e["batch_lrs"] for e in every(p0, "epoch")}
    lrs1 = {e["epoch"]: e["batch_lrs"] for e in every(p1, "epoch")}
    out["10"] = f"rank 0 learning rates by epoch: {lrs}" + ("" if lrs == lrs1 else f"; rank 1: {lrs1}")
    out["12"] = f"optimizer class {o[0].get('optimizer') if o[0] else None}, rate before fit {f0['initial_lr'] if f0 else None}"
    if run2 is not None:
        printed2, probes2, tail2 = run2
        hang2 = [t for t in tail2 if t.startswith("HANG")]
        tail2 = [t for t in tail2 if not t.startswith("HANG")]
        q0, q1 = probes2.get(0, []), probes2.get(1, [])
        g0, g1 = first(q0, "fit"), first(q1, "fit")
        loads = [[os.path.basename(str(x["path"])) + ":" + x["how"] for x in every(r, "load_model")] for r in (q0, q1)]
        errs = [e["error"] for r in (q0, q1) for e in every(r, "script_error")]
        d2 = bool(first(q0, "done")) and bool(first(q1, "done"))
        e2 = [first(r, "train_end") for r in (q0, q1)]
        s2 = e2[0] and e2[1] and e2[0]["weights"] == e2[1]["weights"]
        l2 = {e["epoch"]: e["batch_lrs"] for e in every(q0, "epoch")}
        out["8"] = (f"run 2 (--epochs 4): {tail2[0] if tail2 else '?'}; finished {d2}; errors {errs[:1]}; "
                    f"initial_epoch {[g['initial_epoch'] if g else None for g in (g0, g1)]}; loads {loads}; "
                    f"weights equal at end {s2}; rank 0 lrs {l2}; files {tail2[1][6:200] if len(tail2) > 1 else '?'}")
    return out


for name in sys.argv[1:]:
    print(f"##### {name}")
    for key, value in judge(name).items():
        print(f"  {key:>4}: {value}")


def verdicts(name, done_steps=LAST_STEP, base_lr=0.00625, novograd_base=0.00625):
    """Step -> (true/false, one line of what the runs showed), by the rules of the module
    docstring; steps after done_steps (a part-way script) are false ('not started')."""
    stem = name[:-3]
    run1, run2 = parse(f"{RUNS}/{stem}.1.log"), parse(f"{RUNS}/{stem}.2.log")
    printed, probes, tail = run1
    hang1 = [t for t in tail if t.startswith("HANG")]
    tail = [t for t in tail if not t.startswith("HANG")]
    p0, p1 = probes.get(0, []), probes.get(1, [])
    f0, f1 = first(p0, "fit"), first(p1, "fit")
    scaled = base_lr * 2
    v = {}
    ok_fit = bool(f0 and f1)
    hv = [f.get("horovod") for f in (f0, f1)] if ok_fit else None
    v[1] = (ok_fit and (hv is None or None in hv or [h[:2] for h in hv] == [[0, 2], [1, 2]]),
            f"both ranks reached model.fit as ranks {hv and [h[:2] if h else None for h in hv]} of 2" if ok_fit else "a rank did not reach model.fit")
    g = [[x["gpus"] for x in every(r, "set_visible_devices")] for r in (p0, p1)]
    v[2] = (g == [[["/physical_device:GPU:0"]], [["/physical_device:GPU:1"]]],
            f"with 2 fake GPUs on one host, rank 0 kept {g[0]}, rank 1 {g[1]}")
    hosts = parse(f"{RUNS}/{stem}.hosts.log")
    if hosts is not None:
        hp = hosts[1]
        hg = [[x["gpus"] for x in every(hp.get(r, []), "set_visible_devices")] for r in (0, 1)]
        herr = [e["error"][:60] for r in (0, 1) for e in every(hp.get(r, []), "script_error")]
        hdone = all(first(hp.get(r, []), "done") for r in (0, 1))
        hok = hg == [[["/physical_device:GPU:0"]], [["/physical_device:GPU:0"]]] and hdone
        v[2] = (v[2][0] and hok, v[2][1] + f"; as on 2 hosts with 1 GPU each (local rank 0 on both): rank 0 kept {hg[0]}, "
                f"rank 1 {hg[1]}" + (f", errors {herr}" if herr else ", both finished"))
    so = [len([t for s, t in printed.get(r, []) if s == "stdout" and t.replace(chr(8), '').strip()]) for r in (0, 1)]
    v[3] = (so[0] > 0 and so[1] == 0, f"stdout lines: rank 0 {so[0]}, rank 1 {so[1]}" +
            (f" (rank 1: {[t[:50] for s, t in printed.get(1, []) if s == 'stdout' and t.strip()][:2]})" if so[1] else ""))
    o = [first(r, "optimizer") for r in (p0, p1)]
    ar = [x.get("allreduce_of_rank_plus_1") if x else None for x in o]
    w1 = [first(r, "after_first_batch") for r in (p0, p1)]
    we = [first(r, "train_end") for r in (p0, p1)]
    same1 = bool(w1[0] and w1[1] and w1[0]["weights"] == w1[1]["weights"])
    samee = bool(we[0] and we[1] and we[0]["weights"] == we[1]["weights"])
    v[4] = (ar == [1.5, 1.5] and (samee or not same1),
            f"the optimizer's allreduce of [rank+1] gave {ar} (1.5 = average), trainable weights equal at the end: {samee}")
    v[5] = (same1, f"trainable weights after the first step {'identical' if same1 else 'differ'} on the 2 ranks")
    k = [first(r, "keyed") for r in (p0, p1)]
    ips = [c for c in (f0["callbacks"] if f0 else []) if "images_per_step" in c]
    if k[0] and k[1] and k[0]["train"] and k[1]["train"]:
        t0, t1 = set(k[0]["train"]), set(k[1]["train"])
        va0, va1 = set(k[0]["validation"] or []), set(k[1]["validation"] or [])
        good = (not (t0 & t1) and len(t0 | t1) == 512 and len(k[0]["train"]) == 256 and not (va0 & va1)
                and len(va0 | va1) == 128 and len(k[0]["validation"] or []) == 64 and f0["epochs"] == 3
                and (not ips or "images_per_step=128" in ips[0]))
        v[6] = (good, f"first epoch: {len(k[0]['train'])}+{len(k[1]['train'])} training images, {len(t0 & t1)} on both ranks, "
                      f"{len(t0 | t1)}/512 covered; validation {len(k[0]['validation'] or [])}+{len(k[1]['validation'] or [])}, "
                      f"{len(va0 & va1)} on both, {len(va0 | va1)}/128; steps {f0['steps_per_epoch']}/{f0['validation_steps']}, "
                      f"epochs {f0['epochs']}" + (f", {ips[0].split('[')[1][:-1]}" if ips else ""))
    else:
        v[6] = (False, "no keyed data pass (the script did not reach fit)")
    saw = {}
    for r, p in ((0, p0), (1, p1)):
        raw = {x["epoch"]: x["loss"] for x in every(p, "raw_logs")}
        for s in every(p, "callback_saw"):
            own = abs(s["loss"] - raw.get(s["epoch"], -1)) < 1e-6
            saw.setdefault(s["callback"] + ("" if r == 0 else "@1"), set()).add("own" if own else "averaged")
    avg_ok = bool(saw) and all(val == {"averaged"} for val in saw.values())
    v[7] = (avg_ok, "loss seen by " + ", ".join(f"{c}: {'/'.join(sorted(s))}" for c, s in saw.items()))
    cb = [f["callbacks"] if f else [] for f in (f0, f1)]
    writers = [[c.split("(")[0] for c in cbs if c.startswith(("ModelCheckpoint", "TensorBoard"))] for cbs in cb]
    files = tail[1][6:] if len(tail) > 1 else ""
    v[9] = (writers[0] == ["ModelCheckpoint", "TensorBoard"] and writers[1] == [] and "checkpoint-1.h5" in files,
            f"writers: rank 0 {writers[0]}, rank 1 {writers[1]}; log dir after run 1: {' '.join(x for x in files.split() if 'events' not in x)}"
            f" + {files.count('events')} event file(s)")
    lrs = {e["epoch"]: [round(x, 7) for x in e["batch_lrs"]] for e in every(p0, "epoch")}
    lrs1 = {e["epoch"]: [round(x, 7) for x in e["batch_lrs"]] for e in every(p1, "epoch")}
    e1 = lrs.get(1, [None])[0]
    given = f0["initial_lr"] if f0 else None
    v[10] = (close(given, scaled), f"rate given to the optimizer: {given} (base {base_lr} x 2 = {scaled}); epoch 1 ran at {e1}")
    scaled = given if given else scaled  # the warmup and schedule are judged against the script's own scaled rate
    ramp = [round(scaled / 2 * (1 + (b + 1) / 4), 7) for b in range(4)]  # Horovod counts the batch as done
    want = {0: ramp, 1: [scaled] * 4, 2: [round(scaled * 0.1, 7)] * 4}
    sched_ok = all(all(close(a, b) for a, b in zip(lrs.get(e, []), want[e])) and len(lrs.get(e, [])) == 4 for e in want) and lrs == lrs1
    def show(e):
        got = lrs.get(e)
        return got[0] if got and len(set(got)) == 1 else got
    v[11] = (sched_ok, f"rates per batch: epoch 0 {lrs.get(0)}, epoch 1 {show(1)}, epoch 2 {show(2)}"
                       + ("" if lrs == lrs1 else f"; rank 1 differs: {lrs1}"))
    v[12] = (bool(o[0]) and o[0].get("optimizer") == "NovoGrad" and close(f0["initial_lr"], novograd_base * 2),
             f"optimizer {o[0].get('optimizer') if o[0] else None}, rate given to it {f0['initial_lr'] if f0 else None} "
             f"(NovoGrad's base {novograd_base} x 2 = {novograd_base * 2})")
    if run2 is not None:
        printed2, probes2, tail2 = run2
        hang2 = [t for t in tail2 if t.startswith("HANG")]
        tail2 = [t for t in tail2 if not t.startswith("HANG")]
        q0, q1 = probes2.get(0, []), probes2.get(1, [])
        g0, g1 = first(q0, "fit"), first(q1, "fit")
        loads = [[x["how"] for x in every(r, "load_model") if x["how"] == "hvd.load_model"] or
                 [x["how"] for x in every(r, "load_model")] for r in (q0, q1)]
        errs = [e["error"] for r in (q0, q1) for e in every(r, "script_error")]
        d2 = bool(first(q0, "done")) and bool(first(q1, "done"))
        e2 = [first(r, "train_end") for r in (q0, q1)]
        s2 = bool(e2[0] and e2[1] and e2[0]["weights"] == e2[1]["weights"])
        ie = [g["initial_epoch"] if g else None for g in (g0, g1)]
        l2 = {e["epoch"]: round(e["batch_lrs"][0], 7) for e in every(q0, "epoch")}
        v[8] = (d2 and ie == [3, 3] and loads[0] == ["hvd.load_model"] and loads[1] == [] and s2,
                f"run 2 ({tail2[0].replace('SECONDS', 's') if tail2 else '?'}): initial_epoch {ie}, load_model on rank 0 {loads[0]}, "
                f"rank 1 {loads[1]}, finished {d2}, weights equal {s2}" + (f", error {errs[0][:120]}" if errs else "")
                + f", epoch rates {l2}" + (" HANG (Horovod stall warning)" if hang2 else ""))
        if d2 and 3 in l2 and not close(l2[3], scaled * 0.1):
            v[11] = (False, v[11][1] + f"; after resuming, epoch 3 ran at {l2[3]}")
        elif d2 and 3 in l2:
            v[11] = (v[11][0], v[11][1] + f"; resumed epoch 3 at {l2[3]}")
        if errs and any("NovoGrad" in e or "tfa" in e for e in errs):
            v[12] = (False, v[12][1] + f"; resuming failed: {errs[0][:120]}")
    else:
        v[8] = (False, "no resume run")
    if hang1:
        v[0] = (False, "run 1 HANG (Horovod stall warning)")
    for step in range(done_steps + 1, LAST_STEP + 1):
        v[step] = (False, "not started (part-way script); " + v[step][1])
    return dict(sorted((k, x) for k, x in v.items() if k))
