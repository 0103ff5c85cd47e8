"""The step chain: the annotated source, its renderer and the committed step scripts.

Fast: no TensorFlow, no Horovod.
"""

import difflib
import re

import pytest

from authoring import chain as step_chain
from authoring import patches, variants
from authoring.chain import LAST_STEP, StepSyntaxError, render
from workbook.facts import STEP_TITLES

SOURCE_TEXT = step_chain.SOURCE.read_text(encoding="utf-8")
STEPS = range(LAST_STEP + 1)
REGENERATE = "python -m authoring build"


def rendered(step):
    return render(SOURCE_TEXT, step)


def committed(step):
    return (step_chain.OUTPUT_DIR / step_chain.output_name(step)).read_text(encoding="utf-8")


def todo_steps(text):
    return {int(number) for number in re.findall(r"# TODO: Step (\d+)\b", text)}


def test_step_titles_cover_every_step():
    assert sorted(STEP_TITLES) == list(range(1, LAST_STEP + 1))
    assert all(title and len(title) <= 60 for title in STEP_TITLES.values())


def test_rendering_is_deterministic():
    for step in STEPS:
        assert rendered(step) == rendered(step)
        assert rendered(step).endswith("\n")
        assert "#@" not in rendered(step)


def test_committed_files_are_up_to_date():
    stale = step_chain.stale_files()
    assert not stale, f"stale step scripts {stale}: regenerate with `{REGENERATE}`"


@pytest.mark.parametrize("step", STEPS)
def test_committed_file_equals_rendering(step):
    assert committed(step) == rendered(step), f"regenerate with `{REGENERATE}`"


def test_solution_is_step_12():
    solution = (step_chain.OUTPUT_DIR / "fashion_mnist_solution.py").read_text(encoding="utf-8")
    assert solution == committed(LAST_STEP) == rendered(LAST_STEP)


def test_starting_script_has_every_todo_and_no_horovod():
    text = rendered(0)
    assert todo_steps(text) == set(range(1, LAST_STEP + 1))
    # Only the TODO comments may name Horovod.
    code = [line for line in text.splitlines() if not line.strip().startswith("#")]
    assert not [line for line in code if "hvd" in line or "horovod" in line.lower()]
    assert not [line for line in code if "tensorflow_addons" in line or "tfa." in line]


@pytest.mark.parametrize("step", range(1, LAST_STEP + 1))
def test_after_step_has_only_the_later_todos(step):
    assert todo_steps(rendered(step)) == set(range(step + 1, LAST_STEP + 1))


@pytest.mark.parametrize("step", range(1, LAST_STEP + 1))
def test_diff_touches_only_this_steps_blocks(step):
    old_text, new_text = rendered(step - 1).splitlines(), rendered(step).splitlines()
    # The steps of the blocks that enclose each line: a changed line must be inside `step`'s.
    old_steps, new_steps = (
        [steps for _, steps in step_chain.render_lines(SOURCE_TEXT, s)] for s in (step - 1, step)
    )
    assert len(old_steps) == len(old_text) and len(new_steps) == len(new_text)
    matcher = difflib.SequenceMatcher(None, old_text, new_text, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    assert changes, f"step {step} changes nothing"
    for _, i1, i2, j1, j2 in changes:
        for i in range(i1, i2):
            assert step in old_steps[i], f"step {step} removes a line outside its blocks: " + repr(
                old_text[i]
            )
        for j in range(j1, j2):
            assert step in new_steps[j], f"step {step} adds a line outside its blocks: " + repr(
                new_text[j]
            )


@pytest.mark.parametrize("step", range(1, LAST_STEP + 1))
def test_every_step_explains_itself_with_a_horovod_comment(step):
    diff = difflib.ndiff(rendered(step - 1).splitlines(), rendered(step).splitlines())
    added = [line[2:].strip() for line in diff if line.startswith("+ ")]
    assert any(line.startswith("# Horovod:") for line in added), added


@pytest.mark.parametrize("step", STEPS)
def test_script_compiles_and_lines_are_short(step):
    text = rendered(step)
    compile(text, step_chain.output_name(step), "exec")
    long_lines = [line for line in text.splitlines() if len(line) > 100]
    assert not long_lines


TF1_ERA = ["ConfigProto", "Session(", "set_session", "fit_generator", "horovod.keras"]


@pytest.mark.parametrize("step", STEPS)
def test_no_tf1_era_apis(step):
    text = rendered(step)
    for needle in TF1_ERA:
        assert needle not in text, needle
    assert not re.search(r"^\s*(import keras|from keras)\b", text, re.MULTILINE)
    # learning_rate=, never the deprecated lr= (initial_lr= of Horovod's callbacks is fine).
    assert not re.search(r"(?<![\w.])lr\s*=", text)
    assert "optimizers.SGD" not in text.replace("optimizers.legacy.SGD", "")


def test_renders_nested_blocks_and_else_branches():
    source = "\n".join(
        [
            "a",
            "#@ step 2",
            "b2",
            "    #@ step 5",
            "    c5",
            "    #@ else",
            "    c",
            "    #@ end",
            "#@ else",
            "b",
            "#@ end",
            "#@ step 3",
            "d3",
            "#@ end",
            "e",
        ]
    )
    assert render(source, 0) == "a\nb\ne\n"
    assert render(source, 2) == "a\nb2\n    c\ne\n"
    assert render(source, 3) == "a\nb2\n    c\nd3\ne\n"
    assert render(source, 5) == "a\nb2\n    c5\nd3\ne\n"
    lines = step_chain.render_lines(source, 5)
    assert [sorted(steps) for _, steps in lines] == [[], [2], [2, 5], [3], []]


@pytest.mark.parametrize(
    "source, line, message",
    [
        ("a\n#@ step 3\nb\n", 2, "never closed"),
        ("a\n#@ else\nb\n", 2, "without '#@ step'"),
        ("a\n#@ end\n", 2, "without '#@ step'"),
        ("#@ step 0\na\n#@ end\n", 1, f"outside 1..{LAST_STEP}"),
        (f"a\nb\n#@ step {LAST_STEP + 1}\nc\n#@ end\n", 3, f"outside 1..{LAST_STEP}"),
        ("#@ step two\na\n#@ end\n", 1, "expected '#@ step N'"),
        ("#@ step 2\na\n#@ else\nb\n#@ else\nc\n#@ end\n", 5, "second '#@ else'"),
        ("#@ step 2\na\n    #@ end\n", 3, "indented differently"),
        ("#@ stop 2\na\n", 1, "unknown marker"),
        ("#@ step 2\n#@ step 4\na\n#@ end\n", 1, "never closed"),
    ],
)
def test_parser_rejects_malformed_markers(source, line, message):
    with pytest.raises(StepSyntaxError, match=message) as error:
        render(source, LAST_STEP, "x.steps.py")
    assert error.value.line == line
    assert f"x.steps.py:{line}:" in str(error.value)


def test_check_and_build_commands(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(step_chain, "OUTPUT_DIR", tmp_path)
    assert step_chain.main(["check"]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert step_chain.main(["build"]) == 0
    assert len(list(tmp_path.glob("*.py"))) == LAST_STEP + 2
    for name in step_chain.BONUSES.values():
        assert (tmp_path / name).is_file(), f"build did not write {name}"
    for name, _ in variants.VARIANTS.values():
        assert (tmp_path / name).is_file(), f"build did not write {name}"
    assert step_chain.main(["check"]) == 0
    (tmp_path / "fashion_mnist_after_step_07.py").write_text("# edited by hand\n")
    assert step_chain.main(["check"]) == 1
    assert "fashion_mnist_after_step_07.py" in capsys.readouterr().err
    # A variant edited by hand is stale too (it is the solution with its patch applied).
    elastic = tmp_path / ELASTIC
    elastic.write_text(elastic.read_text().replace("COMMIT = 10", "COMMIT = 5"))
    assert step_chain.main(["check"]) == 1
    assert ELASTIC in capsys.readouterr().err


# --- bonus references: the solution plus the `#@ bonus NAME` blocks ---------------------------

BONUS_NAMES = sorted(step_chain.BONUSES)


def bonus_rendered(name):
    return step_chain.render_bonus(SOURCE_TEXT, name)


@pytest.mark.parametrize("name", BONUS_NAMES)
def test_committed_bonus_reference_equals_rendering(name):
    committed_text = (step_chain.OUTPUT_DIR / step_chain.BONUSES[name]).read_text(encoding="utf-8")
    assert committed_text == bonus_rendered(name), f"regenerate with `{REGENERATE}`"


@pytest.mark.parametrize("name", BONUS_NAMES)
def test_bonus_reference_is_the_solution_plus_only_its_blocks(name):
    solution = step_chain.render_lines(SOURCE_TEXT, LAST_STEP)
    bonus = step_chain.render_lines(SOURCE_TEXT, LAST_STEP, bonus=name)
    # Nothing of the solution is replaced (no `#@ else` in this bonus's blocks)...
    assert not [text for text, keys in solution if name in keys]
    # ...and taking the bonus's block lines out of its reference gives back the solution.
    added = [text for text, keys in bonus if name in keys]
    assert [text for text, keys in bonus if name not in keys] == [text for text, _ in solution]
    assert any(line.startswith("def ") for line in added), f"the {name} bonus adds no function"
    text = bonus_rendered(name)
    compile(text, step_chain.BONUSES[name], "exec")
    assert not [line for line in text.splitlines() if len(line) > 100]


@pytest.mark.parametrize("name", BONUS_NAMES)
def test_bonus_answers_stay_out_of_the_chain(name):
    inside = {
        text.strip()
        for text, keys in step_chain.render_lines(SOURCE_TEXT, LAST_STEP, bonus=name)
        if name in keys and text.strip() and not text.strip().startswith("#")
    }
    assert inside
    for step in STEPS:
        lines = {line.strip() for line in rendered(step).splitlines()}
        assert f'"{name}": {name},' not in lines and f"def {name}(" not in rendered(step)


def test_bonus_blocks_render_only_into_their_bonus():
    source = "\n".join(
        [
            "a",
            "#@ bonus alexnet",
            "b",
            "#@ else",
            "c",
            "#@ end",
            "#@ step 3",
            "    #@ bonus alexnet",
            "    d",
            "    #@ end",
            "#@ end",
            "",
        ]
    )
    assert render(source, LAST_STEP) == "a\nc\n"
    assert render(source, 2, bonus="alexnet") == "a\nb\n"
    assert render(source, LAST_STEP, bonus="alexnet") == "a\nb\n    d\n"
    lines = step_chain.render_lines(source, 3, bonus="alexnet")
    keys = [sorted(map(str, keys)) for _, keys in lines]
    assert keys == [[], ["alexnet"], ["3", "alexnet"]]
    with pytest.raises(ValueError, match="bonus must be one of"):
        render(source, LAST_STEP, bonus="lenet")


@pytest.mark.parametrize(
    "source, line, message",
    [
        ("a\n#@ bonus lenet\nb\n#@ end\n", 2, "unknown bonus 'lenet'"),
        ("#@ bonus\na\n#@ end\n", 1, "expected '#@ bonus NAME'"),
        ("#@ bonus AlexNet\na\n#@ end\n", 1, "expected '#@ bonus NAME'"),
        ("a\n#@ bonus alexnet\nb\n", 2, "'#@ bonus alexnet' is never closed"),
        ("#@ bonus alexnet\na\n  #@ end\n", 3, "from its '#@ bonus alexnet' on line 1"),
    ],
)
def test_parser_rejects_malformed_bonus_markers(source, line, message):
    with pytest.raises(StepSyntaxError, match=message) as error:
        render(source, LAST_STEP, "x.steps.py", bonus="alexnet")
    assert error.value.line == line


# --- variants: the solution with a patch applied (the elastic script) ------------------------

ELASTIC, ELASTIC_PATCH = variants.VARIANTS["elastic"]
SOLUTION_TEXT = rendered(LAST_STEP)


def elastic_of(solution: str) -> str:
    return patches.apply_patch(solution, ELASTIC_PATCH.read_text(encoding="utf-8"), "p.patch")


def test_committed_variant_is_the_solution_with_its_patch():
    committed_text = (step_chain.OUTPUT_DIR / ELASTIC).read_text(encoding="utf-8")
    assert committed_text == variants.header(ELASTIC_PATCH) + elastic_of(SOLUTION_TEXT)
    assert committed_text.startswith("# Generated by `python -m authoring build`")
    assert "Do not edit" in committed_text.splitlines()[1]
    compile(committed_text, ELASTIC, "exec")
    assert not [line for line in committed_text.splitlines() if len(line) > 100]


def test_a_chain_change_outside_the_hunks_reaches_the_variant():
    changed = SOLUTION_TEXT.replace('    "Trouser",\n', '    "Trousers",\n')
    assert changed != SOLUTION_TEXT
    assert '    "Trousers",\n' in elastic_of(changed)


def test_a_chain_change_inside_a_hunk_fails_the_build_and_names_the_hunk(tmp_path):
    line = "validation_steps = len(x_test) // args.val_batch_size\n"
    assert line in SOLUTION_TEXT
    changed = SOLUTION_TEXT.replace(line, line.replace("val_batch_size", "batch_size"))
    with pytest.raises(patches.PatchError, match=r"p\.patch:\d+: hunk \d+ no longer matches"):
        elastic_of(changed)
    # `authoring build` still writes the chain, then fails naming the patch.
    source = tmp_path / "x.steps.py"
    source.write_text(SOURCE_TEXT.replace(line, line.replace("val_batch_size", "batch_size")))
    with pytest.raises(patches.PatchError):
        step_chain.build(source, tmp_path / "out")
    assert (tmp_path / "out" / step_chain.SOLUTION_FILE_NAME).read_text() == changed
    assert not (tmp_path / "out" / ELASTIC).exists()


def test_hunks_are_found_by_their_text_and_must_be_unambiguous():
    base = "a\nb\nc\nd\n"
    patch = "--- x\n+++ y\n@@ -99,1 +99,1 @@\n b\n-c\n+C\n"  # wrong numbers: not used
    assert patches.apply_patch(base, patch) == "a\nb\nC\nd\n"
    with pytest.raises(patches.PatchError, match="matches 2 places"):
        patches.apply_patch("b\nc\nb\nc\n", patch)
    with pytest.raises(patches.PatchError, match="not a line of a unified diff"):
        patches.apply_patch(base, patch + "?c\n")


HUNK = "@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n"


@pytest.mark.parametrize(
    "base, expected",
    [
        ("a\nb\nN\nc\nd\ne\nf\ng\n", "a\nb\nN\nc\nD\ne\nf\ng\n"),  # in the context
        ("a\nb\nc\nd\ne\nN\nf\ng\n", "a\nb\nc\nD\ne\nN\nf\ng\n"),
        ("N\nb\nc\nd\ne\nf\nN\n", "N\nb\nc\nD\ne\nf\nN\n"),  # context lines changed
    ],
)
def test_with_fuzz_new_lines_next_to_a_hunk_leave_it_in_place(base, expected):
    with pytest.raises(patches.PatchError, match="hunk 1 no longer matches"):
        patches.apply_patch(base, HUNK)
    assert patches.apply_patch(base, HUNK, fuzz=2) == expected


def test_with_fuzz_a_changed_line_or_an_ambiguous_place_still_fails():
    with pytest.raises(patches.PatchError, match=r"x\.patch:1: hunk 1 no longer matches the base"):
        patches.apply_patch("a\nb\nc\nd2\ne\nf\ng\n", HUNK, "x.patch", fuzz=2)
    with pytest.raises(patches.PatchError, match="no longer matches"):  # three lines away
        patches.apply_patch("N\nN\nN\nd\ne\nf\ng\n", HUNK, fuzz=2)
    with pytest.raises(patches.PatchError, match="matches 2 places"):
        patches.apply_patch("x\nc\nd\ne\ny\nx\nc\nd\ne\ny\n", HUNK, fuzz=2)


def test_record_writes_the_patch_that_gives_back_the_edited_file(tmp_path, monkeypatch):
    patch_path = tmp_path / "elastic.patch"
    monkeypatch.setitem(variants.VARIANTS, "elastic", (ELASTIC, patch_path))
    monkeypatch.setattr(variants, "REPO", tmp_path)
    edited = elastic_of(SOLUTION_TEXT).replace("BATCHES_PER_COMMIT = 10", "BATCHES_PER_COMMIT = 5")
    edited_path = tmp_path / "edited.py"
    edited_path.write_text(variants.header(patch_path) + edited)  # the header is left out
    variants.record("elastic", edited_path, SOLUTION_TEXT)
    assert patches.apply_patch(SOLUTION_TEXT, patch_path.read_text()) == edited
