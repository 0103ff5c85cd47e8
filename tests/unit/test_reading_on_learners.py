"""The static reading is advice: where it can't follow the code it says "can't tell" (and the
check cell runs the script); it must never be confidently wrong. On the learner-style corpus
(tests/grader_cases/learners, with what 2-worker runs showed in truth.json) no step it calls
passed or failed may disagree with the truth."""

import json
from pathlib import Path

from grader import check_all
from workbook.facts import STEPS

LEARNERS = Path(__file__).resolve().parents[1] / "grader_cases" / "learners"


def test_the_reading_is_never_confidently_wrong_on_the_learner_corpus():
    truth = json.loads((LEARNERS / "truth.json").read_text())
    wrong, decided = [], 0
    for name, known in sorted(truth.items()):
        for result in check_all(LEARNERS / name):
            if result.status == "can't tell":
                continue
            decided += 1
            if (result.status == "passed") != known["steps"][str(result.step)]:
                wrong.append((name, result.step, result.status, result.message[:120]))
    assert not wrong, "\n".join(map(str, wrong))
    assert decided > len(truth) * len(STEPS) * 0.6  # it still decides most steps itself
