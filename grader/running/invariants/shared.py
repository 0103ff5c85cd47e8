"""What several steps' invariants share: how to word a finding (finding, not_shown), how the
check ran the script (Setting, parsed, recipe), which ranks reported what (ranks_with,
ranks_text, not_reached), and the learning rates the ranks saw (rates_by_epoch, rate_list,
schedule_text)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from grader.report import CANT_TELL, FAILED, Result
from grader.running.evidence import Evidence, split_by_callback
from grader.running.expected import Recipe

SAME_RATE = 1e-3  # relative; learning rates are float32


def title(step: int) -> str:
    """Step `step`'s invariant in a few words, the title of its findings: TITLE of step_NN.py."""
    return importlib.import_module(f"{__package__}.step_{step:02d}").TITLE


def finding(step: int, status: str, message: str, hint: str = "") -> Result:
    """Step `step`'s invariant: PASSED (it holds), FAILED or CANT_TELL, and what was seen."""
    return Result(status, title(step), message, step=step, hint=hint)


def not_shown(step: int, message: str) -> Result:
    """CANT_TELL because the script kept the run from showing step `step` (it stopped, hung or
    exited before, or never did what the step is about): `withheld`, so it earns no credit."""
    return Result(CANT_TELL, title(step), message, step=step, withheld=True)


@dataclass
class Setting:
    """How the check ran the script, for the invariants that compare against it.

    The first run trains `first_epochs` epochs from scratch; the second, with the same
    --log-dir on rank 0, is asked for `final_epochs` and must go on from the first run's last
    checkpoint. Every other rank gets a --log-dir of its own in each run (empty, as if rank 0's
    disk were on another machine): whatever it writes there, it wrote as a second writer.
    `asked` holds the options passed (base_lr, warmup_epochs, lr_drops, train_images,
    batch_size), used where the script did not parse them.
    """

    np: int
    log_dir: str
    first_epochs: int
    final_epochs: int
    asked: dict
    # The base rate the lesson's SGD script (step 11) takes from the asked preset, which step
    # 12 halves for NovoGrad; None: not known, not checked.
    sgd_preset_lr: float | None = None

    def private_log_dir(self, rank: int, run: int) -> str:
        return self.log_dir if rank == 0 else f"{self.log_dir}-rank{rank}-run{run}"


def parsed(evidence: Evidence, name: str, setting: Setting, rank: int = 0, run: int = 1):
    """The value of option `name` as the script parsed it in launch `run`, else what the
    check asked (the first launch's options; the second runs on the script's defaults)."""
    record = evidence.ranks(run).get(rank)
    values = ((record.data.get("args") or {}).get("values") or {}) if record else {}
    value = values.get(name)
    return (setting.asked.get(name) if run == 1 else None) if value is None else value


def recipe(
    evidence: Evidence, setting: Setting, scaled_lr: float | None = None, run: int = 1
) -> Recipe | None:
    """The rates the lesson's recipe gives for the options launch `run` parsed (None without
    a --base-lr); `scaled_lr`, when given, in place of base_lr x N. A script without
    --warmup-epochs (before step 11) is held to the warmup the check asked for."""
    drops = parsed(evidence, "lr_drops", setting, run=run)
    base_lr = parsed(evidence, "base_lr", setting, run=run)
    if scaled_lr is not None:
        base_lr = scaled_lr / setting.np
    if not isinstance(base_lr, (int, float)):
        return None
    if drops is None:
        drops = []
    return Recipe(
        base_lr=float(base_lr),
        workers=setting.np,
        warmup_epochs=float(parsed(evidence, "warmup_epochs", setting, run=run) or 0),
        lr_drops=tuple(int(d) for d in (drops if isinstance(drops, list) else [drops])),
    )


def ranks_with(evidence: Evidence, run: int, what) -> dict:
    return {
        rank: value
        for rank, record in sorted(evidence.ranks(run).items())
        if (value := what(record)) is not None
    }


def own_epochs(evidence: Evidence, setting: Setting) -> int | None:
    """The epochs model.fit was told in the first run when that was not --epochs on some rank
    (`args.epochs // hvd.size()`: step 6's mistake, which leaves later epochs untrained); else
    None."""
    told = {fit.get("epochs") for fit in ranks_with(evidence, 1, lambda r: r.fit).values()}
    if not told or told == {setting.first_epochs}:
        return None
    return min((e for e in told if isinstance(e, int)), default=None)


def epochs_cut(evidence: Evidence, setting: Setting) -> str:
    """ " (its model.fit trained 2 of the 5 epochs asked: step 6's to judge)", or ""."""
    epochs = own_epochs(evidence, setting)
    if epochs is None or epochs >= setting.first_epochs:
        return ""
    return (
        f" (its model.fit trained {epochs} of the {setting.first_epochs} epochs asked: step 6 "
        "judges the epochs)"
    )


def ranks_text(ranks: list) -> str:
    """ "rank 1", "ranks 0 and 1", "ranks 1, 2 and 3"."""
    names = [str(rank) for rank in ranks]
    if len(names) == 1:
        return f"rank {names[0]}"
    return f"ranks {', '.join(names[:-1])} and {names[-1]}"


def not_reached(evidence: Evidence, have: dict, what: str, run: int = 1) -> str:
    """ "rank 1 never ...": which ranks did not report `what`."""
    absent = [rank for rank in range(evidence.np) if rank not in have]
    second = " in the second run" if run == 2 else ""
    return f"can't tell: {ranks_text(absent)} never {what}{second}"


def relative(a, b) -> float:
    import numpy as np

    scale = max(float(np.max(np.abs(a))) if a.size else 0.0, 1e-30)
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


def on_some_ranks(evidence: Evidence, callback: str, step: int) -> Result | None:
    """FAILED when only some ranks pass Horovod's `callback` (which calls a collective) to
    model.fit: the others never join it, so the run can't go on; else None."""
    fits = ranks_with(evidence, 1, lambda r: r.fit)
    having, others = split_by_callback(fits, callback)
    if not having or not others or len(fits) < evidence.np:
        return None
    return finding(
        step,
        FAILED,
        f"{ranks_text(having)} passed hvd.callbacks.{callback} to "
        f"model.fit and {ranks_text(others)} did not: it waits for every rank, so "
        "the ranks that have it wait forever",
        f"Pass hvd.callbacks.{callback} to "
        "model.fit on every rank: only the writers belong under `if hvd.rank() == "
        "0:`.",
    )


def file_names(paths) -> list:
    return sorted({str(path).replace("\\", "/").rsplit("/", 1)[-1] for path in paths})


def rates_by_epoch(evidence: Evidence, rank: int, finished: bool = False) -> list:
    """[(run, epoch, [rates])] of one rank, in order; `finished`: only the epochs it finished."""
    found = []
    for run in sorted(evidence.runs):
        record = evidence.ranks(run).get(rank)
        if record:
            done = record.epoch_logs()
            for epoch, rates in sorted(record.learning_rates().items()):
                if rates and None not in rates and (epoch in done or not finished):
                    found.append((run, epoch, rates))
    return found


def rate_list(rates: list) -> str:
    shown = [f"{rate:.4g}" for rate in rates]
    return shown[0] if len(set(shown)) == 1 else " → ".join(shown)


def schedule_text(epochs: list) -> str:
    return "; ".join(f"epoch {epoch + 1}: {rate_list(rates)}" for _, epoch, rates in epochs)
