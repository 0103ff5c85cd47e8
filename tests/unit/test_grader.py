"""The step checker (grader/) against the real reference chain and a corpus of mistakes.

Fast: plain `ast`, no TensorFlow. The reference scripts are read at test time, so these tests
follow the reference when its wording changes.
"""

import ast
import html
import io
import re
import tokenize

import black
import pytest

import grader
from authoring import chain as step_chain
from authoring.chain import LAST_STEP
from authoring.notebooks import SOURCE_DIR
from grader import batch, check_all, check_bonus, check_step, check_strict
from grader.bonus import BONUSES
from grader.reading import budget, strict
from grader.reading.rules import step_08, step_11
from grader.report import FAILED, Result
from grader_cases.mistakes import CASES
from workbook.facts import step_notebook
from workbook.prose import code_html

STEPS = range(1, LAST_STEP + 1)
SOLUTIONS = step_chain.OUTPUT_DIR


def reference_text(step):
    return (SOLUTIONS / step_chain.output_name(step)).read_text(encoding="utf-8")


def passed_steps(results):
    return [result.step for result in results if result.passed]


def check_text(tmp_path, text, name="fashion_mnist.py"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return check_all(path)


def strip_comments(text):
    """The script with every comment blanked out (docstrings stay: they are code)."""
    lines = text.split("\n")
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            (row, start), (_, end) = token.start, token.end
            lines[row - 1] = lines[row - 1][:start] + lines[row - 1][end:]
    return "\n".join(lines)


def reformat(text):
    return black.format_str(text, mode=black.Mode(line_length=60))


def reformat_without_comments(text):
    return reformat(strip_comments(text))


# ---- the reference chain ----------------------------------------------------------------


def test_starting_script_fails_every_check():
    results = check_all(SOLUTIONS / "fashion_mnist.py")
    assert passed_steps(results) == []
    assert all(result.message and result.hint and result.expected_diff for result in results)


@pytest.mark.parametrize("step", STEPS)
def test_after_step_n_passes_exactly_checks_1_to_n(step):
    results = check_all(SOLUTIONS / step_chain.output_name(step))
    assert passed_steps(results) == list(range(1, step + 1)), str(results)


def test_solution_passes_every_check():
    results = check_all(SOLUTIONS / "fashion_mnist_solution.py")
    assert results.passed, str(results)


@pytest.mark.parametrize("transform", [reformat, strip_comments, reformat_without_comments])
@pytest.mark.parametrize("step", range(0, LAST_STEP + 1))
def test_formatting_and_comments_do_not_matter(tmp_path, step, transform):
    original = check_all(SOLUTIONS / step_chain.output_name(step))
    changed = check_text(tmp_path, transform(reference_text(step)))
    assert passed_steps(changed) == passed_steps(original)
    assert [r.message.split(":", 1)[-1] for r in changed if not r.passed] == [
        r.message.split(":", 1)[-1] for r in original if not r.passed
    ]


def test_crlf_line_endings_are_accepted(tmp_path):
    path = tmp_path / "fashion_mnist.py"
    path.write_bytes(reference_text(LAST_STEP).replace("\n", "\r\n").encode())
    assert check_all(path).passed


def test_expected_diff_shows_only_that_step():
    for step in STEPS:
        diff = grader.reference.expected_diff(step)
        assert diff.startswith("---") and f"after step {step}" in diff
        added = [
            line
            for line in diff.splitlines()
            if line.startswith("+") and not line.startswith("+++")
        ]
        assert added, f"step {step} adds nothing?"
        source = step_chain.SOURCE.read_text(encoding="utf-8")
        before, after = step_chain.render(source, step - 1), step_chain.render(source, step)
        for line in diff.splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                assert line[1:] in after
            if line.startswith("-") and not line.startswith("---"):
                assert line[1:] in before


# ---- the mistakes corpus ----------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_mistakes_corpus(tmp_path, case):
    text = case.apply(reference_text(case.base_step))
    results = check_text(tmp_path, text)
    result = results[case.step - 1]
    assert result.step == case.step
    if case.expect_pass:
        assert passed_steps(results)[: case.base_step] == list(range(1, case.base_step + 1)), str(
            results
        )
        assert case.expect_message in result.message, result.message
        if not case.expect_message:
            assert result.message == "done", result.message
    else:
        assert not result.passed, f"{case.description}: step {case.step} passed"
        assert case.expect_message in result.message, result.message
        assert "could not check" not in result.message


def test_corpus_covers_every_step():
    for step in STEPS:
        wrong = [case for case in CASES if case.step == step and not case.expect_pass]
        right = [case for case in CASES if case.step == step and case.expect_pass]
        assert len(wrong) >= 3 and len(right) >= 2, (
            f"step {step}: {len(wrong)} wrong, {len(right)} right"
        )


UNCALLED = [case for case in CASES if "is a function: call it" in case.expect_message]


@pytest.mark.parametrize("case", UNCALLED, ids=lambda case: case.id)
def test_uncalled_functions_are_reported_at_their_own_line(tmp_path, case):
    text = case.apply(reference_text(case.base_step))
    result = check_text(tmp_path, text)[case.step - 1]
    function = case.expect_message.split(" is a function")[0]  # "hvd.size"
    line = text.split("\n")[result.line - 1]
    assert re.search(re.escape(function) + r"(?!\w|\()", line), (result.line, line)
    assert result.message.startswith(f"line {result.line}: ")


def test_step_11_recognises_the_starting_scripts_step_decay():
    # The lesson's multiplier is the starting script's step_decay, kept as it is: the reading
    # recognises it (grader.reading.schedule.STEP_DECAY) and leaves every other function to a run.
    from grader.reading import schedule
    from grader.reading.names import Script

    for step in (0, 11, LAST_STEP):
        script = Script.from_text(reference_text(step))
        (step_decay,) = [
            node
            for node in script.tree.body
            if isinstance(node, ast.FunctionDef) and node.name == "step_decay"
        ]
        assert schedule.is_step_decay(script, step_decay), step
    changed = reference_text(11).replace("epoch >= drop", "epoch > drop")
    script = Script.from_text(changed)
    step_decay = next(n for n in script.tree.body if getattr(n, "name", "") == "step_decay")
    assert not schedule.is_step_decay(script, step_decay)


def test_a_keras_schedule_is_left_to_a_run(tmp_path):
    """Step 11: what a Keras LearningRateScheduler kept beside the warmup sets at each epoch
    (and what it does to Horovod's momentum correction) is for a run to show: the reading
    can't tell, and says why."""
    from grader.reading.names import Script
    from grader.reading.verdicts import Advice, Note
    from grader_cases.mistakes.edits import KERAS_SCHEDULE, SCHEDULE_CALL

    text = reference_text(11).replace(SCHEDULE_CALL, KERAS_SCHEDULE)
    verdict = step_11.check(Script.from_text(text))
    assert isinstance(verdict, Note) and not isinstance(verdict, Advice), verdict
    assert "Keras LearningRateScheduler" in verdict.message
    result = check_text(tmp_path, text)[10]
    assert result.passed and result.status == "can't tell", result


def test_step_8_text_hint_and_check_say_the_same(tmp_path):
    def words(text):
        return " ".join(text.split())

    lesson = words((SOURCE_DIR / step_notebook(8).source_name).read_text())
    assert words(step_08.WEIGHTS_HINT) in lesson
    assert step_08.WHY_WEIGHTS in step_08.HINT and step_08.HOW_WEIGHTS in step_08.HINT
    case = next(c for c in CASES if c.description == "optimizer variables not created")
    result = check_text(tmp_path, case.apply(reference_text(case.base_step)))[case.step - 1]
    assert step_08.WHY_WEIGHTS in result.message and result.hint == step_08.WEIGHTS_HINT
    assert "opt._create_all_weights(model.trainable_variables)" in reference_text(8)


def test_a_wrong_step_does_not_fail_the_others(tmp_path):
    text = reference_text(LAST_STEP).replace(
        "BroadcastGlobalVariablesCallback(0)", "BroadcastGlobalVariablesCallback(1)"
    )
    results = check_text(tmp_path, text)
    assert [r.step for r in results if not r.passed] == [5]


# ---- the Python API ---------------------------------------------------------------------


def test_check_step_defaults_to_fashion_mnist_py_here(tmp_path, monkeypatch):
    (tmp_path / "fashion_mnist.py").write_text(reference_text(5), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert check_step(5).passed
    assert not check_step(6).passed
    assert check_step(5, path="fashion_mnist.py").passed
    with pytest.raises(ValueError):
        check_step(LAST_STEP + 1)


def test_results_render_as_text_and_escaped_html(tmp_path):
    text = reference_text(4).replace(
        "opt = hvd.DistributedOptimizer(opt)", "hvd.DistributedOptimizer(opt)"
    )
    results = check_text(tmp_path, text)
    failed = results[3]
    plain = str(failed)
    assert plain.startswith("[FAIL] Step 4: ") and "Hint:" in plain and "Expected change:" in plain
    page = failed._repr_html_()
    assert page.count("<details") == 1 and "Expected change" in page
    assert code_html(failed.message) in page and code_html(failed.hint) in page
    assert "<code>hvd.DistributedOptimizer(...)</code> returns the wrapped optimizer" in page
    for line in failed.expected_diff.splitlines():
        assert html.escape(line) in page
    assert str(results[0]).startswith("[PASS] Step 1: ")
    assert f"3 of {LAST_STEP} checks pass" in str(results)  # 1-3 pass, 4 fails, 5-... not done
    assert f"3 of {LAST_STEP} checks pass" in results._repr_html_()


def test_html_escapes_learner_text(tmp_path):
    text = reference_text(LAST_STEP).replace(
        "BroadcastGlobalVariablesCallback(0)", "BroadcastGlobalVariablesCallback('<b>x</b>')"
    )
    result = check_text(tmp_path, text)[4]
    assert "<b>x</b>" in result.message
    assert "<b>x</b>" not in result._repr_html_() and "&lt;b&gt;" in result._repr_html_()


def test_code_in_a_verdict_is_shown_as_code_not_as_backticks():
    """Issue 39 (4): a red verdict's `code`, its hint's and its details' show as <code>."""
    detail = Result(FAILED, "Step 7", "rank 0 stopped at line 421 (`model.fit(`)", step=7)
    result = Result(
        FAILED, "Step 7", "stopped at `model.fit(`", hint="Call `f()`", details=[detail]
    )
    page = result._repr_html_()
    assert "<code>model.fit(</code>" in page and "<code>f()</code>" in page and "`" not in page
    assert "`model.fit(`" in str(result)  # plain text keeps them


def test_a_failed_steps_traceback_starts_at_a_frame():
    """The walk saw a traceback excerpt begin with a lone ^^^^ line: cut through a frame."""
    from grader.report import ERROR_TAIL_LINES, Run

    frames = [
        '  File "/x/fashion_mnist.py", line 383, in <module>',
        "    model.fit(",
        '  File "/v/keras/src/engine/training.py", line 1764, in fit',
        "    callbacks = callbacks_module.CallbackList(",
        "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ] * 4
    error = "\n".join(["Traceback (most recent call last):", *frames, "TypeError: boom"])
    result = Result(FAILED, "Step 7", "rank 1 stopped", step=7, run=Run("crashed", error=error))
    shown = result._error_tail().splitlines()
    assert shown[0].startswith('  File "') and shown[-1] == "TypeError: boom"
    assert len(shown) <= ERROR_TAIL_LINES


def test_bad_files_keep_to_themselves(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(reference_text(LAST_STEP), encoding="utf-8")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n", encoding="utf-8")
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\x00\x01\xff" * 100)
    grades = batch.grade_all([broken, good, binary])  # one class, in one process
    assert [grade.score for grade in grades] == [0, LAST_STEP, 0]
    assert "line 1" in grades[0].problem and "binary" in grades[2].problem
    missing = tmp_path / "missing.py"
    for bad, says in (
        (broken, "line 1"),
        (binary, "binary"),
        (missing, "no such file"),
        (tmp_path, "directory"),
    ):
        results = check_all(bad)
        assert len(results) == LAST_STEP and not any(r.passed for r in results)
        assert says in results[0].message


class Boom(Exception):
    pass


def boom(*args):
    raise Boom("a grader bug")


def test_a_checker_error_is_a_verdict_of_its_own_check_only(monkeypatch):
    """grader/reading/guard.py, the one way every static check runs: an error in one check is that
    check's failure, saying the grader could not check it; the other checks keep theirs."""
    solution = SOLUTIONS / step_chain.output_name(LAST_STEP)
    monkeypatch.setattr(step_08, "check", boom)
    results = check_all(solution)
    assert passed_steps(results) == [step for step in STEPS if step != 8]
    assert results[7].message == "the grader could not check this step (Boom: a grader bug)"
    monkeypatch.setattr(strict, "matches", boom)
    result = check_strict(solution)
    assert not result.passed
    assert result.message == "the grader could not check this (Boom: a grader bug)"
    monkeypatch.setattr(BONUSES["alexnet"], "check", boom)
    result = check_bonus("alexnet", solution)
    assert not result.passed and "could not check this (Boom" in result.message


def test_a_check_that_runs_out_of_budget_fails_saying_so(monkeypatch):
    def too_big(script):
        raise budget.Spent("a test budget", 7)

    monkeypatch.setattr(step_11, "check", too_big)
    result = check_step(11, SOLUTIONS / step_chain.output_name(LAST_STEP))
    assert not result.passed and result.line == 7
    assert result.message.startswith("Step 11 could not be checked: the checker gave up at line 7")


@pytest.mark.parametrize(
    "content, phrase, unreadable",
    [
        (b"", "empty", False),
        (b"# only a comment\n\n", "no code", False),
        (b"x = (1,\n", "line 1", False),
        (b"if True:\nprint(1)\n", "line 2", False),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary", True),
        ("x = 'caf\u00e9'\n".encode("latin-1"), "not UTF-8", True),
        (b"x = " + b"(" * 300 + b"1" + b")" * 300 + b"\n", "nested", False),
    ],
)
def test_bad_files_give_a_clear_message(tmp_path, content, phrase, unreadable):
    path = tmp_path / "fashion_mnist.py"
    path.write_bytes(content)
    results = check_all(path)
    assert all(not r.passed and r.file_problem for r in results)
    assert phrase in results[0].message
    assert results[0].unreadable == unreadable
    assert phrase in str(results) and "Traceback" not in str(results)


def test_huge_file_is_refused(tmp_path):
    path = tmp_path / "fashion_mnist.py"
    path.write_bytes(b"x = 1\n" * 900_000)  # 5.4 MB
    result = check_step(1, path)
    assert result.unreadable and "MB" in result.message


# ---- strict mode ------------------------------------------------------------------------


def test_strict_accepts_the_reference_reformatted_without_comments(tmp_path):
    path = tmp_path / "fashion_mnist.py"
    path.write_text(reformat(strip_comments(reference_text(LAST_STEP))), encoding="utf-8")
    result = check_strict(path)
    assert result.passed, result.message
    assert check_strict(path, reference_step=LAST_STEP).passed
    assert not check_strict(path, reference_step=11).passed


def test_strict_reports_the_first_differing_lines(tmp_path):
    text = reference_text(LAST_STEP)
    # Change the first integer constant of the training code (after the imports) by one.
    number = next(
        node
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant)
        and type(node.value) is int
        and node.lineno == node.end_lineno
        and node.lineno > 40
    )
    lines = text.split("\n")
    original = lines[number.lineno - 1]
    changed = (
        original[: number.col_offset] + str(number.value + 1) + original[number.end_col_offset :]
    )
    lines[number.lineno - 1] = changed
    path = tmp_path / "fashion_mnist.py"
    path.write_text("\n".join(lines), encoding="utf-8")
    result = check_strict(path)
    assert not result.passed
    assert f"your line {number.lineno}" in result.message and changed.strip() in result.message
    assert "-" + original in result.expected_diff or "+" + original in result.expected_diff


def test_strict_counts_docstrings_as_code(tmp_path):
    text = reference_text(LAST_STEP)
    docstring = ast.get_docstring(ast.parse(text), clean=False)
    first_line = docstring.split("\n")[0]
    changed = text.replace(first_line, first_line + " (edited)", 1)
    path = tmp_path / "fashion_mnist.py"
    path.write_text(changed, encoding="utf-8")
    result = check_strict(path)
    assert not result.passed and "your line 1" in result.message
    path.write_text(changed.replace(" (edited)", "", 1) + "# a comment\n", encoding="utf-8")
    assert check_strict(path).passed


def test_strict_reports_extra_code(tmp_path):
    path = tmp_path / "fashion_mnist.py"
    path.write_text(reference_text(LAST_STEP) + "print('extra')\n", encoding="utf-8")
    result = check_strict(path)
    assert not result.passed and "extra code" in result.message


# ---- speed: nothing heavy is imported ---------------------------------------------------


@pytest.mark.parametrize(
    "step, base, source, target, written",
    [
        (
            10,
            10,
            "scaled_lr = args.base_lr * hvd.size()",
            "scaled_lr = args.base_lr * hvd.local_size()",
            "scaled_lr = args.base_lr * hvd.local_size()",
        ),
        (
            3,
            3,
            "verbose = 1 if hvd.rank() == 0 else 0",
            "verbose = 0 if hvd.rank() == 0 else 1",
            "verbose = 0 if hvd.rank() == 0 else 1",
        ),
    ],
)
def test_a_mistake_is_reported_where_it_is_written_not_where_it_is_used(
    tmp_path, step, base, source, target, written
):
    """The value flows from its assignment to the call that uses it: the message points at the
    assignment (where the learner finds hvd.local_size()) and names the line that uses it."""
    text = reference_text(base)
    assert text.count(source) == 1
    text = text.replace(source, target)
    result = check_text(tmp_path, text)[step - 1]
    assert not result.passed
    assert text.splitlines()[result.line - 1].strip() == written, result.message
    assert re.search(r"\(used at line \d+\)", result.message), result.message


# ---- the checker's layers ---------------------------------------------------------------


@pytest.mark.parametrize(
    "module_name, class_name",
    [("names", "Script"), ("ranks", "Ranks"), ("scaling", "Scaling"), ("training", "Training")],
)
def test_each_layer_names_its_public_api_in_its_docstring(module_name, class_name):
    """A rule's author reads the module's docstring, not its code: every public method of the
    layer's class is named there."""
    import importlib

    module = importlib.import_module(f"grader.reading.{module_name}")
    public = [
        name
        for name, value in vars(getattr(module, class_name)).items()
        if not name.startswith("_") and callable(value) and name != "from_text"
    ]
    assert public
    missing = [name for name in public if not re.search(rf"[`.]{name}\b", module.__doc__)]
    assert missing == []
