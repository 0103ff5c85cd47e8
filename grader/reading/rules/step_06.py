"""Step 6: each worker trains on its own shard for 1/N of the steps, and validates on its own
shard of the test images for 1/N of the validation steps."""

import ast

from grader.reading import ranks, scaling, training
from grader.reading.rules import uncalled
from grader.reading.rules.fit import NO_FIT
from grader.reading.rules.scaled import DIVIDED, scaling_failure
from grader.reading.syntax import HVD, argument, method_name
from grader.reading.verdicts import Advice, Failure, Note, first_verdict

STEP = 6
HINT = (
    "Shard the training and the validation dataset with hvd.size() and hvd.rank() before "
    "shuffling them, divide the training and the validation steps by hvd.size(), and count "
    "hvd.size() batches per step in the throughput."
)
# Horovod's older examples validate 3 * validation_steps // hvd.size() random batches per worker.
OVERSAMPLED = 3


def check(script):
    fit = training.of(script).fit_call()
    if fit is None:
        return Failure(NO_FIT)
    train_data = script.argument(fit, "x", 0)
    validation_data = script.argument(fit, "validation_data", 7)
    if validation_data is not None and _is_none(validation_data):
        validation_data = None
    checks = [
        lambda: _sharding_failure(script, train_data, fit.lineno, "training", validation_data)
    ]
    steps = script.argument(fit, "steps_per_epoch", 12)
    if steps is None and script.unpacks_unknown(fit):
        return Note(
            f"line {fit.lineno}: model.fit(...) gets arguments the grader can't read "
            "(**...): it can't tell whether steps_per_epoch is among them",
            fit.lineno,
        )
    if steps is None:
        return Failure(f"line {fit.lineno}: model.fit(...) gets no steps_per_epoch", fit.lineno)
    checks.append(lambda: scaling_failure(script, steps, "steps_per_epoch", fit.lineno, DIVIDED))
    if validation_data is not None:
        checks.append(lambda: _validation_failure(script, fit, validation_data, train_data))
    checks.append(lambda: _evaluation_failure(script))
    checks.append(lambda: _throughput_failure(script))
    return first_verdict(*checks)


def _evaluation_failure(script):
    """The final model.evaluate tests on all the test images: a shard there would make rank 0
    print its own shard's accuracy as the test accuracy."""
    for call in script.calls:
        if method_name(call) != "evaluate":
            continue
        data = argument(call, "x", 0)
        chain = training.of(script).method_chain(data) if data is not None else []
        shard = next((part for name, part in chain if name == "shard"), None)
        if shard is not None:
            return Failure(
                f"line {shard.lineno}: this shard also reaches model.evaluate(...) on line "
                f"{call.lineno}, so the final test accuracy would be each worker's 1/N only: "
                "shard the validation dataset, not the test images the evaluation reads",
                shard.lineno,
            )
    return None


def _validation_failure(script, fit, data, train_data):
    """Each worker validates its own shard of the test images, once per epoch. Horovod's older
    examples' way, 3/N of a pass of random batches of all of them, works too, at 3 times the
    cost."""
    given = script.argument(fit, "validation_steps", 13)
    if given is not None and _is_none(given):
        given = None
    sharded = any(name == "shard" for name, _ in training.of(script).method_chain(data))
    if not sharded and given is not None and _oversampled(script, given, fit.lineno):
        return Advice(
            f"line {fit.lineno}: validation_steps (`{script.source(given)}`) of random batches "
            "of all the test images is the way of Horovod's older examples: it works, but takes "
            "3 times the validation time of sharding the validation dataset with "
            ".shard(hvd.size(), hvd.rank()) and taking validation_steps // hvd.size() steps",
            fit.lineno,
        )
    return first_verdict(
        lambda: _sharding_failure(script, data, fit.lineno, "validation", train_data),
        lambda: _validation_steps_failure(script, fit, data, given),
    )


def _is_none(node):
    return isinstance(node, ast.Constant) and node.value is None


def _oversampled(script, given, line):
    """validation_steps divided by hvd.size() and taken 3 times: 3 * validation_steps // N."""
    return (
        scaling_failure(script, given, "validation_steps", line, DIVIDED) is None
        and abs(scaling.of(script).scale(given).coef - OVERSAMPLED) < 1e-9
    )


def _validation_steps_failure(script, fit, validation_data, given):
    """Each worker validates its shard once: 1/N of the validation steps (`given`; None: none
    passed)."""
    if given is None:
        chain = training.of(script).method_chain(validation_data)
        if any(name == "repeat" for name, _ in chain):
            return Failure(
                f"line {fit.lineno}: model.fit(...) gets no validation_steps, and the validation "
                "data repeats: validation would never end",
                fit.lineno,
            )
        return None  # Keras validates on the whole of each worker's shard, once
    failure = scaling_failure(script, given, "validation_steps", fit.lineno, DIVIDED)
    if failure:
        return failure
    if abs(scaling.of(script).scale(given).coef - 1) < 1e-9:
        return None
    if _oversampled(script, given, fit.lineno):
        return Advice(
            f"line {fit.lineno}: validation_steps (`{script.source(given)}`) has each worker "
            "validate its shard about 3 times per epoch: the same accuracy, for 3 times the "
            "validation time. validation_steps // hvd.size() goes through each shard once",
            fit.lineno,
        )
    return Failure(
        f"line {fit.lineno}: validation_steps (`{script.source(given)}`): each worker validates "
        "on its own 1/N of the test images, so it takes validation_steps // hvd.size() steps",
        fit.lineno,
    )


def _sharding_failure(script, dataset, line, what, other):
    """`what` ("training" or "validation") data is cut into hvd.size() shards, one per rank.
    Shard calls in the chain of the `other` dataset passed to model.fit are not this one's."""
    chain = training.of(script).method_chain(dataset) if dataset is not None else []
    shards = [(index, call) for index, (name, call) in enumerate(chain) if name == "shard"]
    helper = training.of(script).unfollowed_source(dataset) if dataset is not None else None
    if not shards and helper is not None:
        return Note(
            f"line {helper.lineno}: the {what} data comes from "
            f"{script.source(helper.func)}(...), which the grader did not follow (it follows "
            "helpers made of assignments and a return); it looked for "
            ".shard(hvd.size(), hvd.rank()) on it",
            helper.lineno,
        )
    if not shards:
        if any(_rank_seeded(script, call) for name, call in chain if name == "shuffle"):
            return None  # a rank-dependent shuffle also gives each worker other batches
        if chain and _sliced_by_rank(script, chain[0][1]):
            # from_tensor_slices((x[hvd.rank()::hvd.size()], y[...]))
            return _slices_of_shared_arrays(script, chain[0][1], what)
        return _no_shard_failure(script, line, what, other)
    index, shard = shards[0]
    # The line of `.shard(` itself: in a chain over several lines, the call starts at its first.
    shard_line = getattr(shard.func, "end_lineno", None) or shard.lineno
    num_shards, shard_index = argument(shard, "num_shards", 0), argument(shard, "index", 1)
    if num_shards is None or shard_index is None:
        return Failure(f"line {shard_line}: shard(num_shards, index) needs both", shard_line)
    failure = uncalled.failure(script, num_shards, shard_index)
    if failure:
        return failure
    rank_kind, scale = ranks.of(script).rank_kind, scaling.of(script).scale
    if rank_kind(num_shards) and scale(shard_index).power("size") == 1:
        return Failure(
            f"line {shard_line}: the arguments are swapped: shard(num_shards, index) takes "
            "hvd.size() first, then hvd.rank()",
            shard_line,
        )
    scale = scaling.of(script).scale(num_shards)
    if scale.power("local_size"):
        return Failure(
            f"line {shard_line}: hvd.local_size() counts the workers on this machine only: "
            "cut the data into hvd.size() shards",
            shard_line,
        )
    if scale.powers != (("size", 1),):
        return Failure(
            f"line {shard_line}: cut the data into hvd.size() shards, not "
            f"`{script.source(num_shards)}`",
            shard_line,
        )
    kind = ranks.of(script).rank_kind(shard_index)
    if kind == "local_rank":
        return Failure(
            f"line {shard_line}: hvd.local_rank() repeats on every machine, so workers on "
            "different machines would read the same shard: use hvd.rank()",
            shard_line,
        )
    if kind != "rank":
        return Failure(
            f"line {shard_line}: each worker takes the shard of its rank: the index is hvd.rank()",
            shard_line,
        )
    for name, call in chain[:index]:
        if name == "shuffle" and script.constant(argument(call, "seed", 1)) is None:
            return Failure(
                f"line {shard_line}: this shard comes after a shuffle; shard before shuffling: "
                "each worker shuffles in another order, so shards cut after the shuffle overlap "
                "and miss images",
                shard_line,
            )
    return None


def _rank_seeded(script, shuffle):
    seed = argument(shuffle, "seed", 1)
    return seed is not None and script.mentions_call(seed, f"{HVD}.rank")


def _sliced_by_rank(script, source):
    """True if every array the dataset starts from is sliced [hvd.rank()::hvd.size()]."""
    arrays = source.args[0] if source.args else None
    arrays = script.resolve(arrays) if arrays is not None else None
    items = arrays.elts if isinstance(arrays, (ast.Tuple, ast.List)) else [arrays]
    sliced = scaling.of(script).is_rank_slice
    return all(item is not None and script.mentions(item, sliced) for item in items)


SEEDS = ("numpy.random.seed", "random.seed", "tensorflow.random.set_seed")


def _slices_of_shared_arrays(script, source, what):
    """The parts x[hvd.rank()::hvd.size()] cover the data once only if every worker slices the
    same x: not x[np.random.permutation(n)], which each worker shuffles its own way."""
    sliced = scaling.of(script).is_rank_slice
    parts = []
    arrays = source.args[0] if source.args else None
    script.mentions(arrays, lambda node: sliced(node) and parts.append(node) and False)
    for part in parts:
        variation = ranks.of(script).varies(part.value)
        if variation is None or variation.kind == "unknown":
            continue  # arrays the grader can't follow (load_data()'s): read as the same
        line = part.lineno
        if variation.kind == "state" and not script.calls_to(*SEEDS):
            return Failure(
                f"line {line}: `{script.source(part.value)}` is shuffled on each worker its own "
                f"way (`{script.source(variation.cause)}`) before the worker takes its part, so "
                f"the parts overlap and miss {what} images: take the parts of the same arrays "
                "on every worker, and shuffle each part afterwards (the dataset's .shuffle)",
                line,
            )
        return Note(
            f"line {line}: it can't tell whether `{script.source(part.value)}` is the same on "
            "every worker, which its parts [hvd.rank()::hvd.size()] need to cover the data once",
            line,
        )
    return None


def _no_shard_failure(script, line, what, other):
    other_chain = training.of(script).method_chain(other) if other is not None else []
    elsewhere = {id(call) for _, call in other_chain}
    for call in script.calls:
        if method_name(call) != "shard" or id(call) in elsewhere:
            continue
        if script.is_discarded(call):
            return Failure(
                f"line {call.lineno}: shard(...) returns a new dataset, and the result is thrown "
                "away: assign it to the dataset variable",
                call.lineno,
            )
        if script.in_function(call):
            return Note(
                f"line {call.lineno}: this shard(...) is inside a function, and the grader can't "
                f"tell whether it reaches the {what} data passed to model.fit (line {line}); it "
                f"looked for .shard(hvd.size(), hvd.rank()) on the {what} dataset",
                call.lineno,
            )
        return Failure(
            f"line {call.lineno}: this shard(...) does not reach the {what} data passed to "
            f"model.fit (line {line}): shard the {what} dataset",
            call.lineno,
        )
    if what == "training":
        return Failure(
            "every worker trains on the same images: shard the training dataset with "
            ".shard(hvd.size(), hvd.rank())"
        )
    return Failure(
        f"line {line}: every worker validates on random batches of all the test images, so "
        "together they evaluate some twice and leave others out: shard the validation dataset "
        "with .shard(hvd.size(), hvd.rank())",
        line,
    )


def _throughput_failure(script):
    """Throughput counts the images of one step; with N workers a step trains N batches."""
    for call in script.calls:
        if script.qualified_name(call.func) != "Throughput" or script.in_function(call):
            continue
        images = argument(call, "images_per_step", 0)
        scale = scaling.of(script).scale(images) if images is not None else None
        if scale is not None and scale.opaque:
            return Note(
                f"line {call.lineno}: it can't tell how Throughput's images per step "
                f"(`{script.source(images)}`) change with the number of workers; it looked for "
                "args.batch_size * hvd.size()",
                call.lineno,
            )
        if images is not None and scale.powers != (("size", 1),):
            return uncalled.failure(script, images) or Failure(
                f"line {call.lineno}: Throughput gets `{script.source(images)}` images per step, "
                "but one step now trains a batch on each worker: multiply by hvd.size()",
                call.lineno,
            )
    return None
