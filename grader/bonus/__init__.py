"""Bonus exercises: checks for the bonus notebooks, outside the graded steps.

Each bonus module has NAME, TITLE, HINT and check(script) -> Failure | None, like a step rule;
nbgrader never sees them (the bonus notebooks have no graded cells).

    from grader import check_bonus, train_bonus
    check_bonus("alexnet")    # static: is AlexNet in the script's model registry?
    train_bonus("alexnet")    # behavioural: does the script train it on 2 workers?
"""

from grader.bonus import alexnet

BONUSES = {module.NAME: module for module in (alexnet,)}
