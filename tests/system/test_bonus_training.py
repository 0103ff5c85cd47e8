"""The bonus for real (grader.train_bonus): the reference's AlexNet trains for a few steps on 2
real horovodrun workers, and a script without the bonus is not run. The static bonus check is
in tests/unit/test_grader_bonus.py, its command line in tests/smoke/test_grader_cli.py.
"""

from authoring import chain as step_chain
from grader import train_bonus

SOLUTIONS = step_chain.OUTPUT_DIR
REFERENCE = SOLUTIONS / step_chain.BONUSES["alexnet"]
SOLUTION = SOLUTIONS / "fashion_mnist_solution.py"


def test_train_bonus_trains_alexnet_on_two_workers(tmp_path):
    result = train_bonus("alexnet", REFERENCE, logs_root=tmp_path, quiet=True)
    assert result.passed, f"{result.message}\n{result.hint}"
    assert "`alexnet` trained for a few steps on 2 workers" in result.message
    logs = list(tmp_path.glob("bonus-alexnet-*/horovodrun.log"))
    assert len(logs) == 1
    assert 'RESULT {"model": "alexnet"' in logs[0].read_text()


def test_train_bonus_does_not_run_a_script_without_the_bonus(tmp_path):
    result = train_bonus("alexnet", SOLUTION, logs_root=tmp_path, quiet=True)
    assert not result.passed and result.message.startswith("not run yet, the check fails:")
    assert not list(tmp_path.iterdir())
