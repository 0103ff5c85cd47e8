"""Step 6: each worker trains on its own shard, for 1/N of the steps; validation 3/N batches."""

import ast

from grader import ranks, scaling, training
from grader.rules import uncalled
from grader.rules.fit import NO_FIT
from grader.rules.scaled import DIVIDED, scaling_failure
from grader.syntax import HVD, argument
from grader.verdicts import Failure, first_verdict

STEP = 6
HINT = (
    "Shard the training dataset with hvd.size() and hvd.rank() before shuffling it, divide the "
    "training steps per epoch by hvd.size(), run 3 * the validation steps // hvd.size() per "
    "worker, and count hvd.size() batches per step in the throughput."
)


def check(script):
    fit = training.of(script).fit_call()
    if fit is None:
        return Failure(NO_FIT)
    checks = [lambda: _sharding_failure(script, argument(fit, "x", 0), fit.lineno)]
    for name, index, coef in (("steps_per_epoch", 12, 1), ("validation_steps", 13, 3)):
        given = argument(fit, name, index)
        if given is None:
            return Failure(f"line {fit.lineno}: model.fit(...) gets no {name}", fit.lineno)
        checks.append(
            lambda given=given, name=name, coef=coef: _split_failure(
                script, given, name, coef, fit.lineno
            )
        )
    checks.append(lambda: _throughput_failure(script))
    return first_verdict(*checks)


def _sharding_failure(script, dataset, line):
    chain = training.of(script).method_chain(dataset) if dataset is not None else []
    shards = [(index, call) for index, (name, call) in enumerate(chain) if name == "shard"]
    if not shards:
        if any(_rank_seeded(script, call) for name, call in chain if name == "shuffle"):
            return None  # a rank-dependent shuffle also gives each worker other batches
        if chain and _sliced_by_rank(script, chain[0][1]):
            return None  # from_tensor_slices((x[hvd.rank()::hvd.size()], y[...]))
        return _no_shard_failure(script, line)
    index, shard = shards[0]
    shard_line = shard.lineno
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
                f"line {shard_line}: shard before shuffling: each worker shuffles in another "
                "order, so shards cut after the shuffle overlap and miss images",
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


def _no_shard_failure(script, line):
    for call in script.calls:
        if not isinstance(call.func, ast.Attribute) or call.func.attr != "shard":
            continue
        if script.is_discarded(call):
            return Failure(
                f"line {call.lineno}: shard(...) returns a new dataset, and the result is thrown "
                "away: assign it to the dataset variable",
                call.lineno,
            )
        return Failure(
            f"line {call.lineno}: this shard(...) does not reach the dataset passed to model.fit "
            f"(line {line}): shard the training dataset",
            call.lineno,
        )
    return Failure(
        "every worker reads the same images: shard the training dataset with "
        ".shard(hvd.size(), hvd.rank())"
    )


def _split_failure(script, given, name, coef, line):
    """Steps are divided among the workers; validation samples `coef`/N of the test batches."""
    failure = scaling_failure(script, given, name, line, DIVIDED)
    if failure:
        return failure
    if coef != 1 and abs(scaling.of(script).scale(given).coef - coef) > 1e-9:
        return Failure(
            f"line {line}: {name} (`{script.source(given)}`): each worker samples 3/N of the "
            "test batches, 3 * validation_steps // hvd.size(), for a less noisy validation",
            line,
        )
    return None


def _throughput_failure(script):
    """Throughput counts the images of one step; with N workers a step trains N batches."""
    for call in script.calls:
        if script.qualified_name(call.func) != "Throughput" or script.in_function(call):
            continue
        images = argument(call, "images_per_step", 0)
        if images is not None and scaling.of(script).scale(images).powers != (("size", 1),):
            return uncalled.failure(script, images) or Failure(
                f"line {call.lineno}: Throughput gets `{script.source(images)}` images per step, "
                "but one step now trains a batch on each worker: multiply by hvd.size()",
                call.lineno,
            )
    return None
