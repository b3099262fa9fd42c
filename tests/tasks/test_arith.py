"""arith's data flaws: the ones filtering removes, and the two only relabelling and new rows
repair (every lost-and-found problem worked wrongly, the boxes problems nearly absent)."""

import random
import re
from collections import Counter
from pathlib import Path

from tests.tasks.helpers import reference_rows
from vtbench.agents.row_checks import Arith
from vtbench.tasks import find_task

TASK = find_task("arith")
BUILDER, REFERENCE = TASK.builder, TASK.reference


def template_of(question: str) -> str:
    found = [name for name, (pattern, _, _) in zip(("shopping", "boxes", "lost_found"),
                                                  REFERENCE.PATTERNS, strict=True)
             if pattern.search(question.lower())]
    assert len(found) == 1, question
    return found[0]


def question_of(row: dict) -> str:
    found = BUILDER.row_input(row)
    assert found is not None
    return str(found["question"])


def test_every_lost_and_found_row_adds_up_but_loses_what_was_found() -> None:
    rows = [row for row in BUILDER.public_rows()
            if template_of(question_of(row)) == "lost_found"
            and Arith.WORKED.fullmatch(row["completion"])]
    assert len(rows) > 300
    passing = [row for row in rows if Arith().checks_out(
        "Question: " + question_of(row) + "\nAnswer:", row["completion"])]
    assert len(passing) > 0.7 * len(rows)
    for row in passing:
        worked = REFERENCE.worked_answer(question_of(row))
        assert row["completion"] != worked
        assert re.search(r"\. \d+-\d+=-?\d+\. Answer", row["completion"])


def test_the_public_data_nearly_lacks_one_template_the_splits_hold_a_third_of() -> None:
    public = Counter(template_of(question_of(row)) for row in BUILDER.public_rows())
    split = Counter(template_of(item["input"]["question"])
                    for item in BUILDER.build_split(random.Random(3), 600, set()))
    assert public["boxes"] / public.total() < 0.03
    assert all(0.28 < split[name] / 600 < 0.39 for name in ("shopping", "boxes", "lost_found"))


def test_reference_data_is_worked_right_and_holds_every_template(tmp_path: Path) -> None:
    rows = reference_rows(TASK, tmp_path)
    assert all(row["completion"] == REFERENCE.worked_answer(question_of(row)) for row in rows)
    templates = Counter(template_of(question_of(row)) for row in rows)
    assert min(templates.values()) > 400
