"""The checker's command line, run for real: python -m grader check FILE [...] (also --bonus),
python -m grader batch, python -m grader run's refusals, and what checking imports in a fresh
Python.

Exit status 0: every requested check passes; 1: one fails; 2: usage error or unreadable file,
with a one-line message on stderr and never a traceback.
"""

import csv
import json
import subprocess
import sys

import pytest

from authoring import chain as step_chain
from authoring.chain import LAST_STEP
from checked_files import SOLUTIONS, after, written
from grader.batch import grade_all, write_csv
from grader_cases.mistakes import CASES
from workbook.facts import STEP_TITLES, STEPS

SOLUTION = SOLUTIONS / "fashion_mnist_solution.py"
STARTER = SOLUTIONS / "fashion_mnist.py"
BONUS_REFERENCE = SOLUTIONS / step_chain.BONUSES["alexnet"]
DOUBTS = [case for case in CASES if case.expect_pass and "can't tell" in case.expect_message]


def grader(*args):
    done = subprocess.run(
        [sys.executable, "-m", "grader", *map(str, args)],
        cwd=step_chain.REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr + done.stdout
    return done


def test_solution_passes_everything():
    done = grader("check", SOLUTION)
    assert done.returncode == 0, done.stdout
    assert f"{LAST_STEP} of {LAST_STEP} checks pass" in done.stdout
    assert done.stdout.count("[PASS]") == LAST_STEP and done.stderr == ""


def test_starting_script_fails():
    done = grader("check", STARTER, "--all")
    assert done.returncode == 1
    assert done.stdout.count("[FAIL]") == LAST_STEP
    assert "Hint:" in done.stdout and "Expected change:" in done.stdout


def test_one_step():
    assert grader("check", after(5), "--step", "5").returncode == 0
    done = grader("check", after(5), "--step", "6")
    assert done.returncode == 1
    assert "[FAIL] Step 6:" in done.stdout and "Step 5" not in done.stdout


def test_json_output():
    done = grader("check", after(7), "--json")
    assert done.returncode == 1
    results = json.loads(done.stdout)
    assert [r["step"] for r in results] == list(range(1, LAST_STEP + 1))
    assert [r["passed"] for r in results] == [True] * 7 + [False] * (LAST_STEP - 7)
    for result in results:
        assert {"step", "title", "passed", "message", "hint", "expected_diff"} <= set(result)
        assert result["title"] == STEP_TITLES[result["step"]]
    assert results[7]["expected_diff"].startswith("--- after step 7")
    single = json.loads(grader("check", after(7), "--step", "7", "--json").stdout)
    assert len(single) == 1 and single[0]["passed"]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["check"],
        ["check", SOLUTION, "--step", str(LAST_STEP + 1)],
        ["check", SOLUTION, "--step", "0"],
        ["check", SOLUTION, "--step", "x"],
        ["check", SOLUTION, "--step", "3", "--all"],
        ["grade", SOLUTION],
        ["check", SOLUTION, "--bogus"],
    ],
)
def test_usage_errors_exit_2(args):
    done = grader(*args)
    assert done.returncode == 2
    assert done.stderr.strip() and done.stdout == ""


def write(tmp_path, content, name="fashion_mnist.py"):
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    "content, phrase",
    [
        (None, "no such file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        ("print('caf\u00e9')\n".encode("latin-1"), "not UTF-8"),
        (b"x = 1\n" * 900_000, "MB"),
    ],
    ids=["missing", "binary", "latin-1", "5MB"],
)
def test_unreadable_files_exit_2_with_one_line(tmp_path, content, phrase):
    path = tmp_path / "fashion_mnist.py" if content is None else write(tmp_path, content)
    for extra in ([], ["--json"], ["--step", "3"], ["--strict"]):
        done = grader("check", path, *extra)
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and phrase in done.stderr
        assert done.stdout == ""


def test_a_directory_exits_2(tmp_path):
    done = grader("check", tmp_path)
    assert done.returncode == 2 and "directory" in done.stderr


def test_empty_file_fails_with_a_message(tmp_path):
    done = grader("check", write(tmp_path, b""))
    assert done.returncode == 1
    assert "the file is empty" in done.stdout
    assert f"all {LAST_STEP} checks fail" in done.stdout


def test_syntax_error_names_the_line(tmp_path):
    lines = [f"x{n} = {n}" for n in range(1, 42)] + ["x = = 1", "y = 2"]
    path = write(tmp_path, "\n".join(lines).encode())
    done = grader("check", path)
    assert done.returncode == 1
    assert "line 42: invalid syntax" in done.stdout
    results = json.loads(grader("check", path, "--json").stdout)
    assert all(r["message"].startswith("line 42: invalid syntax") for r in results)


def test_crlf_is_accepted(tmp_path):
    path = write(tmp_path, SOLUTION.read_bytes().replace(b"\n", b"\r\n"))
    assert grader("check", path).returncode == 0


def test_strict_mode(tmp_path):
    done = grader("check", SOLUTION, "--strict")
    assert done.returncode == 0 and "matches fashion_mnist_solution.py" in done.stdout
    done = grader("check", after(11), "--strict")
    assert done.returncode == 1 and "first difference" in done.stdout
    assert grader("check", after(11), "--step", "11", "--strict").returncode == 0
    assert grader("check", after(11), "--strict", after(11)).returncode == 0
    results = json.loads(grader("check", after(4), "--strict", after(5), "--json").stdout)
    assert len(results) == 1 and not results[0]["passed"] and results[0]["step"] is None
    missing = grader("check", SOLUTION, "--strict", tmp_path / "nope.py")
    assert missing.returncode == 2 and "reference" in missing.stderr


def test_command_line_imports_nothing_heavy():
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "grader", "check", SOLUTION, "--all"],
        cwd=step_chain.REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "grader.report" in imported  # the measurement works
    heavy = {"tensorflow", "numpy", "horovod", "keras", "nbformat", "tensorflow_addons"}
    assert not {name for name in imported if name.split(".")[0] in heavy}


def test_checking_imports_no_tensorflow_or_numpy():
    code = (
        "import sys, grader\n"
        f"results = grader.check_all({str(SOLUTIONS / 'fashion_mnist_solution.py')!r})\n"
        "assert results.passed\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'numpy', 'horovod', 'keras', 'nbformat', 'tensorflow_addons'))\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=step_chain.REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"


def test_batch_scores_what_is_not_failed_and_lists_the_doubts(tmp_path):
    doubt = DOUBTS[0]
    course = tmp_path / "class"
    written(course / "alice" / "a", after(step_chain.LAST_STEP).read_text())
    written(course / "bob", after(6).read_text())
    written(course / "carol", "def broken(:\n")
    (course / "dave").mkdir()
    written(course / "erin", doubt.apply(after(doubt.base_step).read_text()))
    grades = {grade.student: grade for grade in grade_all([course])}
    assert {name: grade.score for name, grade in grades.items()} == {
        "alice": len(STEPS),
        "bob": 6,
        "carol": 0,
        "dave": 0,
        "erin": doubt.base_step,
    }
    assert grades["bob"].failed_steps == [step for step in STEPS if step > 6]
    assert str(grades["bob"]).startswith(f"bob: 6/{len(STEPS)}  (step 7: ")
    assert grades["carol"].problem.startswith("line 1") and str(grades["dave"]) == (
        f"dave: 0/{len(STEPS)}  (no fashion_mnist.py)"
    )
    assert doubt.step in grades["erin"].cant_tell_steps
    assert doubt.step not in grades["erin"].failed_steps
    assert grades["alice"].cant_tell_steps == [] and grades["alice"].failed_steps == []
    write_csv(list(grades.values()), tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as table:
        header = next(csv.reader(table))
    assert header == ["student", "score", "max_score", "failed_steps", "problem", "script"]
    done = subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(course), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=step_chain.REPO,
    )
    assert done.returncode == 0, done.stderr
    by_student = {grade["student"]: grade for grade in json.loads(done.stdout)}
    assert by_student["erin"]["cant_tell_steps"] == grades["erin"].cant_tell_steps


def test_bonus_command_line():
    done = grader("check", BONUS_REFERENCE, "--bonus", "alexnet")
    assert done.returncode == 0 and "[PASS] Bonus: an AlexNet in the model registry" in done.stdout
    done = grader("check", SOLUTION, "--bonus", "alexnet", "--json")
    assert done.returncode == 1 and '"passed": false' in done.stdout
    done = grader("check", SOLUTION, "--bonus", "lenet")
    assert done.returncode == 2 and "invalid choice: 'lenet'" in done.stderr
    done = grader("check", SOLUTION, "--bonus", "alexnet", "--step", "3")
    assert done.returncode == 2 and "not allowed with argument" in done.stderr
    done = grader("check", SOLUTION, "--bonus", "alexnet", "--strict")
    assert done.returncode == 2 and "--bonus and --strict do not go together" in done.stderr


def test_run_refuses_what_it_cannot_run(tmp_path):
    """python -m grader run (the run-for-real check) refuses, in one line, what it cannot run."""
    done = grader("run", tmp_path / "missing.py", "--step", "5")
    assert done.returncode == 2 and "missing.py: no such file" in done.stderr
    assert "not run" not in done.stderr  # the same one line as the static check's
    done = grader("run", after(5), "--step", str(LAST_STEP + 1))
    assert done.returncode == 2 and f"--step must be 1..{LAST_STEP}" in done.stderr
    (tmp_path / "broken.py").write_text("import horovod.tensorflow.keras as hvd\nhvd.init(\n")
    done = grader("run", tmp_path / "broken.py", "--step", "4")
    assert done.returncode == 1 and "not run:" in done.stdout
