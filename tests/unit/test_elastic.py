"""Elastic training (solutions/bonus/): the elastic script's helpers are the solution's, statement
for statement (it is generated from the solution and a patch: authoring/variants.py), it uses
no outdated API, and the notebook runner passes the elastic options through. Its discovery
script: tests/smoke/test_elastic_processes.py; a run losing a worker:
tests/system/test_elastic_runs.py.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "solutions" / "fashion_mnist_solution.py"
BONUS = REPO / "solutions" / "bonus"
ELASTIC_SCRIPT = BONUS / "fashion_mnist_elastic.py"
DISCOVER_HOSTS = BONUS / "discover_hosts.sh"
HOROVODRUN = Path(sys.executable).with_name("horovodrun")

# Besides everything the solution defines before its training part (`args = parse_args()`),
# these helpers of its training part are shared too.
SHARED_TRAINING_HELPERS = ["normalize", "augment"]

# 6 epochs of 24 steps (12 per worker while there are two, 24 with one): long enough to kill a
# worker in epoch 2 and see several epochs after it, about a minute on a busy 2-core machine.
# Generous: on a 2-core machine shared with other jobs (load average 22), epoch 2 started after
# 260 s and the run ended 52 s after the kill; at a quieter moment, after about 30 s and 16-25 s.


# --- fast ------------------------------------------------------------------------------------


def top_level_definitions(path: Path) -> dict[str, ast.AST]:
    """Every top-level function, class and assigned name of a script, by name, in order."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.setdefault(node.name, node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, node)
    return found


def shared_names() -> list[str]:
    """The solution's helpers: what it defines before `args = parse_args()`, and a few after."""
    names = list(top_level_definitions(SOLUTION))
    assert "args" in names, f"{SOLUTION.name} no longer starts its training with args = ..."
    return names[: names.index("args")] + SHARED_TRAINING_HELPERS


def test_elastic_script_shares_the_solutions_helpers():
    solution = top_level_definitions(SOLUTION)
    elastic = top_level_definitions(ELASTIC_SCRIPT)
    missing = [name for name in shared_names() if name not in elastic]
    differ = [
        name
        for name in shared_names()
        if name in elastic and ast.dump(elastic[name]) != ast.dump(solution[name])
    ]
    assert not missing and not differ, (
        f"{ELASTIC_SCRIPT.relative_to(REPO)} lacks {missing} and has a different {differ}: copy "
        f"them over from {SOLUTION.relative_to(REPO)} (and adapt the training part if needed)"
    )
    assert len(shared_names()) >= 10  # the check compares something


def test_elastic_script_uses_no_outdated_api():
    text = ELASTIC_SCRIPT.read_text(encoding="utf-8")
    for outdated in [r"ConfigProto", r"set_session", r"fit_generator", r"horovod\.keras", r"\blr="]:
        assert not re.search(outdated, text), f"{ELASTIC_SCRIPT.name} uses {outdated}"


@pytest.mark.skipif(not HOROVODRUN.exists(), reason=f"no horovodrun beside {sys.executable}")
def test_runner_passes_the_elastic_options_through(tmp_path):
    """The lesson starts the elastic job through the notebook runner: nothing may get lost."""
    from workbook.runner import plan_run
    from workbook.runner.command import HOROVODRUN

    elastic = [
        "--min-np",
        "1",
        "--max-np",
        "2",
        "--host-discovery-script",
        str(DISCOVER_HOSTS),
        "--network-interfaces",
        "lo",
        "--blacklist-cooldown-range",
        "10",
        "100",
    ]
    plan = plan_run(
        ["-np", "2", *elastic, str(ELASTIC_SCRIPT), "--epochs", "3"],
        cwd=tmp_path,
        logs_root=tmp_path / "logs",
        cores=2,
        gpus=0,
    )
    script_at = plan.argv.index(str(ELASTIC_SCRIPT))
    assert plan.argv[len(HOROVODRUN) : script_at] == [
        "--gloo",
        "-np",
        "2",
        *elastic,
        sys.executable,
    ]
    assert plan.argv[script_at + 1 : script_at + 3] == ["--epochs", "3"]
    assert plan.np == 2 and plan.tensorboard_dir == tmp_path / "logs" / plan.run_name
