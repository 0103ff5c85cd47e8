"""Step 10: the learning rate is scaled by the number of workers."""

import ast

from grader.reading.rules.fit import callbacks, optimizer_call
from grader.reading.rules.scaled import factor_failure, scaling_failure
from grader.reading.syntax import argument
from grader.reading.verdicts import Failure

STEP = 10
HINT = "Multiply the base learning rate by hvd.size() and give that scaled rate to the optimizer."


def check(script):
    optimizer, failure = optimizer_call(script)
    if failure:
        return failure
    line = optimizer.lineno
    rate = argument(optimizer, "learning_rate", 0) or argument(optimizer, "lr")
    if rate is None:
        return Failure(
            f"line {line}: the optimizer gets no learning_rate, so it uses its default: pass "
            "the scaled learning rate",
            line,
        )
    failure = scaling_failure(script, rate, "the learning rate", line) or factor_failure(
        script, rate, "the learning rate", line
    )
    if failure:
        return failure
    entries, _ = callbacks(script, "a LearningRateScheduler")
    for entry in entries or []:
        if entry.kind == "LearningRateScheduler" and entry.call is not None:
            schedule = script.resolve(argument(entry.call, "schedule", 0))
            if isinstance(schedule, ast.Lambda):
                failure = scaling_failure(
                    script, schedule.body, "the LearningRateScheduler's rate", entry.line
                )
                if failure:
                    return failure
    return None
