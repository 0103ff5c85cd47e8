"""The static reading is advice: where it can't follow the code it says "can't tell" (and the
check cell runs the script); it must never be confidently wrong. On the learner-style corpus
(tests/grader_cases/learners, built from the chain by authoring.learners, with what 2-worker
runs showed in truth.json) no step it calls
passed or failed may disagree with the truth. A step whose code is done but that no run shows
(truth's `unshown`: the script stops before it, for another step's fault) is done as far as
the code goes, which is what the reading judges; the run decides that it earns nothing."""

from pathlib import Path

import pytest

from authoring import learners
from grader import check_all
from workbook.facts import STEPS


def test_the_reading_is_never_confidently_wrong_on_the_learner_corpus(tmp_path):
    truth = learners.truth()
    scripts = learners.build(tmp_path)
    wrong, decided = [], 0
    for name, known in sorted(truth.items()):
        for result in check_all(scripts[name]):
            if result.status == "can't tell":
                continue
            decided += 1
            done = known["steps"][str(result.step)] or result.step in known.get("unshown", [])
            if (result.status == "passed") != done:
                wrong.append((name, result.step, result.status, result.message[:120]))
    assert not wrong, "\n".join(map(str, wrong))
    assert decided > len(truth) * len(STEPS) * 0.6  # it still decides most steps itself


SOLUTION = Path(__file__).resolve().parents[2] / "solutions" / "fashion_mnist_solution.py"
FIT = """model.fit(
    train_dataset,
    steps_per_epoch=steps_per_epoch,
    epochs=args.epochs,
    initial_epoch=resume_from_epoch,
    validation_data=validation_dataset,
    validation_steps=validation_steps,
    callbacks=callbacks,
    verbose=verbose,
)"""
FIT_ARGS = FIT.replace("model.fit(\n    train_dataset,", "fit_args = dict(") + (
    "\nmodel.fit(train_dataset, **fit_args)"
)
BROADCAST = (
    "resume_from_epoch = int(hvd.broadcast(resume_from_epoch, root_rank=0, "
    'name="resume_from_epoch"))'
)


@pytest.mark.parametrize(
    "old, new, steps",
    [
        # model.fit's arguments gathered in a dict first (issue 37: "gets no steps_per_epoch")
        (FIT, FIT_ARGS, (3, 5, 6, 7, 8, 9, 11)),
        # the epoch agreed by an allreduce (op=hvd.Max: rank 0's), not a broadcast
        (
            BROADCAST,
            BROADCAST.replace(
                "broadcast(resume_from_epoch, root_rank=0,",
                "allreduce(resume_from_epoch, op=hvd.Max,",
            ),
            (8,),
        ),
        # the base rate kept in a config dict
        (
            "scaled_lr = args.base_lr * hvd.size()",
            'config = {"lr": args.base_lr}\nscaled_lr = config["lr"] * hvd.size()',
            (10, 11),
        ),
    ],
)
def test_equivalent_forms_the_reading_does_not_fail(tmp_path, old, new, steps):
    """Correct forms learners write: passed, or can't tell (the run decides), never failed."""
    text = SOLUTION.read_text()
    assert old in text
    script = tmp_path / "fashion_mnist.py"
    script.write_text(text.replace(old, new))
    results = {result.step: result for result in check_all(script)}
    assert [step for step in steps if results[step].status == "failed"] == []
    assert all(result.status != "failed" for result in results.values())


def test_arguments_in_a_dict_it_can_not_read_are_cant_tell(tmp_path):
    text = SOLUTION.read_text().replace(
        FIT,
        FIT_ARGS.replace("fit_args = dict(", "fit_args = load_options(dict(", 1).replace(
            "\nmodel.fit(", ")\nmodel.fit(", 1
        ),
    )
    text = text.replace("import argparse", "import argparse\nload_options = dict", 1)
    script = tmp_path / "fashion_mnist.py"
    script.write_text(text)
    results = {result.step: result for result in check_all(script)}
    assert results[6].status == "can't tell", results[6].message
    assert "can't tell whether steps_per_epoch is among them" in results[6].message
    assert results[3].status == "can't tell" and results[8].status == "can't tell"
