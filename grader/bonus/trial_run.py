"""Does a bonus really train? Runs the learner's script with it under horovodrun, 2 workers.

A smoke test, not a benchmark: a few steps on part of the committed sample, long enough to
build the model on every worker, train it with Horovod and evaluate it.
"""

from __future__ import annotations

import time

from grader.bonus import BONUSES
from grader.report import FAILED, PASSED, Result
from workbook.paths import REPO

SAMPLE_DATA = REPO / "data" / "sample"
SMOKE_ARGS = [
    "--train-images",
    "1024",
    "--test-images",
    "256",
    "--epochs",
    "1",
    "--steps-per-epoch",
    "8",
]
WORKERS = 2
TIMEOUT_S = 900  # TensorFlow starts slowly on a busy machine; a quiet one needs about a minute


def train_bonus(
    name: str,
    path,
    static: Result,
    *,
    np: int = WORKERS,
    logs_root=None,
    timeout: float = TIMEOUT_S,
    quiet: bool = False,
) -> Result:
    """Runs `path --model NAME` on `np` workers for a few steps; passes if it trained NAME.

    `static` is the static check's result for the same file: a failed one is reported instead
    of a run.
    """
    from workbook.runner import horovodrun  # only here: the static checks stay light

    bonus = BONUSES[name]
    title = f"{bonus.TITLE}: it trains on {np} workers"
    if not static.passed:
        return Result(
            FAILED,
            title,
            f"not run yet, the check fails: {static.message}",
            hint=static.hint,
            line=static.line,
            path=str(path),
        )
    command = [str(path), "--model", name, "--data-dir", str(SAMPLE_DATA), *SMOKE_ARGS]
    options = {"logs_root": logs_root} if logs_root is not None else {}
    run = horovodrun(
        command,
        np=np,
        timeout=timeout,
        quiet=quiet,
        run_name=f"bonus-{name}-{time.strftime('%H%M%S')}",
        **options,
    )
    message, passed = verdict(name, run, timeout)
    hint = "" if passed else f"The whole output is in {run.log_path}."
    return Result(PASSED if passed else FAILED, title, message, hint=hint, path=str(path))


def verdict(name: str, run, timeout: float) -> tuple:
    """(message, passed) for a finished RunResult of a bonus's smoke test."""
    if run.timed_out:
        return (
            f"stopped after {timeout:.0f} s without finishing (a busy machine?): try again",
            False,
        )
    if not run.ok:
        last = run.error.strip().splitlines()[-1] if run.error.strip() else run.status()
        return f"the run failed: {last}", False
    metrics = run.metrics
    if not metrics:
        return "the run finished but printed no RESULT line: keep the script's last lines", False
    model = metrics.get("model")
    if model is None:
        return (
            'the RESULT line does not say which model trained: keep "model": model.name in it'
        ), False
    if name not in str(model).lower():
        return (
            f"the run trained `{model}`, not {name}: does the script build its model with "
            f'MODELS[args.model](args), and is the model named "{name}"?'
        ), False
    accuracy = metrics.get("test_accuracy")
    if not isinstance(accuracy, (int, float)) or not 0 <= accuracy <= 1:
        return f"the run reported a test accuracy of {accuracy!r}, not a number in 0..1", False
    return (
        f"`{model}` trained for a few steps on {run.np} workers: test accuracy {accuracy:.2f} "
        f"(chance is 0.10; this smoke test is too short to learn much), "
        f"{metrics.get('images_per_second', 0):.0f} images/s",
        True,
    )


__all__ = ["train_bonus", "verdict"]
