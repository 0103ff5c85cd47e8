"""grader/reference_swap.py: the one-line swap of a crashing step's line for the reference's."""

from __future__ import annotations

import ast

from grader.decision import reference_lines
from grader.reference_swap import failing_lines, feeding_lines, swapped
from grader.report import Run
from workbook.paths import REPO

SOLUTION = (REPO / "solutions" / "fashion_mnist_solution.py").read_text(encoding="utf-8")
AVERAGE = "    hvd.callbacks.MetricAverageCallback(),\n"


def line_of(text: str, line: str) -> int:
    return text[: text.index(line)].count("\n") + 1


def test_a_callback_class_becomes_the_references_instance_in_the_scripts_indentation():
    broken = SOLUTION.replace(AVERAGE, "        hvd.callbacks.MetricAverageCallback,\n")
    swap = swapped(broken, [1, line_of(SOLUTION, AVERAGE)], 7)
    assert swap is not None and swap.step == 7
    assert swap.after == "        hvd.callbacks.MetricAverageCallback(),"
    assert swap.source == SOLUTION.replace(AVERAGE, "    " + AVERAGE)
    assert swap.before == "        hvd.callbacks.MetricAverageCallback,"
    assert f"step 7's line {swap.line} swapped for the reference's `hvd" in swap.words()
    ast.parse(swap.source)


def test_no_swap_when_no_line_of_the_step_is_alike_or_the_line_is_already_the_references():
    assert swapped(SOLUTION, [line_of(SOLUTION, AVERAGE)], 7) is None  # already the reference's
    assert swapped(SOLUTION, [1], 7) is None  # the docstring is like no line of step 7
    assert swapped(SOLUTION, [], 7) is None and swapped(SOLUTION, [10**6], 7) is None


def test_a_swap_that_would_not_parse_is_not_made():
    # The same likeness, once on a line of its own and once opening a call over two lines.
    assert swapped("x = hvd.callbacks.MetricAverageCallback\n", [1], 7) is not None
    assert swapped("x = hvd.callbacks.MetricAverageCallback(\n)\n", [1], 7) is None


def test_the_reference_lines_of_a_step_are_its_added_code_lines():
    assert AVERAGE.rstrip("\n") in reference_lines(7)
    assert all(line.strip() and not line.strip().startswith("#") for line in reference_lines(7))


def test_the_lines_of_a_class_passed_for_an_instance_are_those_naming_it():
    from grader.report import Run

    text = "import x\ncb = [hvd.callbacks.MetricAverageCallback]\nmodel.fit(callbacks=cb)\n"
    run = Run(
        "crashed", line=3, culprit={"kind": "callback class", "class": "MetricAverageCallback"}
    )
    assert failing_lines(text, run) == [2]
    assert failing_lines(text, Run("crashed", line=3)) == [3]
    built = Run("crashed", line=3, culprit={"kind": "callback", "class": "X", "line": 1})
    assert failing_lines(text, built) == [1]


INIT = "hvd.init()\n"


def test_a_missing_line_of_the_step_is_put_before_the_statement_that_failed():
    """hvd.init() left out: step 2's pinning line (the reference's own) raises; step 1's missing
    top-level line goes in before it, and nothing else moves."""
    from grader.reference_swap import inserted

    broken = SOLUTION.replace(INIT, "", 1)
    failing = line_of(broken, "    tf.config.set_visible_devices(")
    assert swapped(broken, [failing], 1) is None  # no line of step 1 is alike: nothing to swap
    swap = inserted(broken, failing, 1)
    assert swap is not None and swap.added and swap.after == "hvd.init()"
    # Before the top-level statement holding the failing line (the `if gpus:` above it).
    assert swap.source.splitlines()[swap.line - 1] == "hvd.init()"
    assert swap.source.splitlines()[swap.line].startswith("if gpus")
    assert swap.source.replace(INIT, "", 1) == broken
    assert swap.failing_line(failing) == failing + 1 and swap.failing_line(1) == 1
    assert f"step 1's `hvd.init()` added before line {swap.line}" in swap.words()
    assert inserted(SOLUTION, failing, 1) is None  # nothing of step 1 is missing


def test_a_crash_on_a_line_written_as_the_reference_is_blamed_on_the_step_that_failed_first():
    """The run saw step 1 fail (Horovod used before hvd.init()) and crashed on step 2's own
    reference line: step 1 is blamed, not step 2."""
    from grader.decision import blamed_steps
    from grader.report import CANT_TELL, FAILED, Result, Run

    code = 'tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")'
    run = Run("crashed", line=301, code=code, exception="ValueError: Horovod is not initialized")
    first = Result(FAILED, "Initialize Horovod", "used Horovod before hvd.init()", step=1)
    shown = Result(CANT_TELL, "Pin one GPU per process", "not shown", step=2)
    findings = {1: first, 2: shown}
    assert blamed_steps(Result(FAILED, "run", "crashed", step=12, run=run), findings) == {1}
    # A line of the learner's own (not the reference's) on the path stays that step's.
    other = Run("crashed", line=301, code="tf.config.set_visible_devices(gpus[0], 'GPU')")
    assert blamed_steps(Result(FAILED, "run", "x", step=12, run=other), findings) == {2}


def test_a_line_the_script_has_only_inside_a_branch_is_put_at_the_top_level():
    """`import tensorflow_addons as tfa` only under an if: NovoGrad's line fails with tfa
    unbound, and the import goes in before the statement holding it."""
    from grader.reference_swap import inserted

    text = "import os\nif os.environ.get('X'):\n    import tensorflow_addons as tfa\nopt = tfa.optimizers.NovoGrad\n"
    swap = inserted(text, 4, 12)
    assert swap is not None
    assert any(
        line.startswith("import tensorflow_addons as tfa") for line in swap.after.splitlines()
    )
    assert swap.source.splitlines()[swap.line - 1 :][-1] == "opt = tfa.optimizers.NovoGrad"


def test_the_swapped_line_keeps_the_scripts_own_names():
    """Pinned by rank with the script's own names: the reference's line comes in with them
    (`physical`, not the reference's `gpus`, which this script never binds); what the step is
    about (hvd.local_rank()) is the reference's, and so are attributes and keywords."""
    from grader.reference_names import bound_names, in_the_scripts_names

    script = (
        "import horovod.tensorflow.keras as hvd\n"
        "physical = tf.config.list_physical_devices('GPU')\n"
        "rank = hvd.rank()\n"
        "if physical:\n"
        "    tf.config.set_visible_devices(physical[rank], 'GPU')\n"
    )
    swap = swapped(script, [5], 2)
    assert swap is not None
    assert swap.after == '    tf.config.set_visible_devices(physical[hvd.local_rank()], "GPU")'
    bound = bound_names(script)
    assert {"physical", "rank", "hvd", "print"} <= bound and "gpus" not in bound
    # An attribute the script spells otherwise is the step's mistake, not a name to keep.
    assert (
        in_the_scripts_names("x = hvd.local_rank()", "x = hvd.rank()", bound)
        == "x = hvd.local_rank()"
    )
    assert in_the_scripts_names("f(root_rank=0)", "f(root=0)", bound) == "f(root_rank=0)"
    # A statement's first line tokenizes as far as it goes.
    assert in_the_scripts_names("gpus = f(", "physical = f(", bound) == "physical = f("


def test_an_import_only_in_a_branch_of_a_function_is_added_where_the_failing_line_runs():
    """NovoGrad imported only in main()'s fresh-start branch: on resume `tfa` is an unbound
    local. The import goes in main(), before the statement holding the failing line, in its
    indentation; a module-level import would not bind the function's local."""
    from grader.reference_swap import inserted

    script = (
        "import warnings\n"
        "import horovod.tensorflow.keras as hvd\n"
        "\n"
        "def main(resume):\n"
        "    if resume:\n"
        "        model = hvd.load_model('m.h5', custom_optimizers=[tfa.optimizers.NovoGrad])\n"
        "    else:\n"
        "        import tensorflow_addons as tfa\n"
        "        model = tfa.optimizers.NovoGrad()\n"
        "    return model\n"
    )
    swap = inserted(script, 6, 12)
    assert swap is not None and swap.line == 5
    added = swap.after.splitlines()
    assert "    import tensorflow_addons as tfa  # noqa: E402" in added
    assert all(text.startswith("    ") and not text.startswith("     ") for text in added)
    assert swap.source.replace(swap.after + "\n", "", 1) == script
    assert "`import tensorflow_addons as tfa`" in swap.words()  # the reference's, no comment
    ast.parse(swap.source)


def test_a_call_over_several_lines_gets_the_references_keywords():
    """op=hvd.Sum in a DistributedOptimizer call over three lines: no one line is step 4's,
    so the call keeps the script's arguments and takes the reference's keywords (none); the
    lines after it move up, and a crash below it is looked for where it moved."""
    from grader.reference_swap import call_swapped

    script = (
        "def build(lr):\n"
        "    opt = hvd.DistributedOptimizer(\n"
        "        tfa.optimizers.NovoGrad(learning_rate=lr),\n"
        "        op=hvd.Sum)\n"
        "    return opt\n"
        "model.fit(x)\n"
    )
    swap = call_swapped(script, 2, 4)
    assert swap is not None and swap.keywords and (swap.line, swap.span) == (2, 3)
    assert "    opt = hvd.DistributedOptimizer(tfa.optimizers.NovoGrad(learning_rate=lr))\n" in (
        swap.source
    )
    assert "hvd.Sum" not in swap.source and "NovoGrad(learning_rate=lr)" in swap.before
    assert swap.failing_line(6) == 4 and swap.failing_line(3) == 2 and swap.failing_line(1) == 1
    assert "the call on line 2 given step 4's keywords" in swap.words()
    assert call_swapped(swap.source, 2, 4) is None  # already the reference's keywords
    assert call_swapped(script, 6, 4) is None  # model.fit: no call of step 4's there


def test_a_value_made_one_assignment_back_is_swapped_where_it_was_made():
    """json.dumps(result) fails on the resume epoch left a tensor: the failing line is not step
    8's, but the line that made the value is, and it becomes the reference's."""
    good = 'resume_from_epoch = int(hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch"))\n'
    bad = 'resume_from_epoch = hvd.broadcast(resume_from_epoch, root_rank=0, name="resume_from_epoch")\n'
    broken = SOLUTION.replace(good, bad)
    failing = 'print("RESULT " + json.dumps(result), flush=True)'
    crash = Run("crashed", line=line_of(broken, failing), code=failing)
    lines = feeding_lines(broken, crash)
    assert line_of(broken, bad) in lines and crash.line not in lines
    assert swapped(broken, failing_lines(broken, crash), 8) is None  # the print is no step's
    swap = swapped(broken, lines, 8)
    assert swap is not None and swap.line == line_of(broken, bad)
    assert swap.source == SOLUTION
