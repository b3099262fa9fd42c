"""The dsl task needs the model: a search of the documented programs without it, within the
harness's CPU budget, scores far below the reference system."""

import random
import shutil
from pathlib import Path

import pytest

from tests.evaluation.conftest import tiny_model, write_harness  # noqa: F401
from vtbench.evaluation import evaluate
from vtbench.tasks import find_task
from vtbench.tasks.store import ensure_splits

# The reference system's val score (README, Calibration: the mean of three seeds).
REFERENCE_VAL = 0.319

# Enumerates plain programs up to three steps, then the documented shape (one or two plain
# steps, then a literal step) with every literal, shortest first; each instance gets an equal
# share of the CPU time left and answers with the first program that reproduces its examples.
SEARCH = """
import itertools, string, time
import dsl
deadline = SECONDS  # process_time counts from the start, as the limit does
NAMES = sorted(dsl.OPERATIONS)
LITERALS = ["".join(t) for t in itertools.product(string.ascii_lowercase,
                                                   repeat=dsl.LITERAL_LENGTH)]

def skeletons():
    for length in range(1, 4):
        for names in itertools.product(NAMES, repeat=length):
            yield list(names), None
    for plain in range(1, 3):
        for names in itertools.product(NAMES, repeat=plain):
            for kind in sorted(dsl.LITERAL_OPERATIONS):
                yield list(names), kind

def apply(names, text):
    for name in names:
        text = dsl.OPERATIONS[name](text)
    return text

def search(examples, until):
    for names, kind in skeletons():
        heads = [apply(names, a) for a, _ in examples]
        if kind is None:
            if all(h == b for h, (_, b) in zip(heads, examples)):
                return " | ".join(names)
            continue
        join = dsl.LITERAL_OPERATIONS[kind]
        for i, literal in enumerate(LITERALS):
            if i % 4096 == 0 and time.process_time() > until:
                return "upper"
            if all(join(h, literal) == b for h, (_, b) in zip(heads, examples)):
                return " | ".join([*names, f"{kind} {literal}"])
    return "upper"

outputs = []
for index, instance in enumerate(instances):
    share = (deadline - time.process_time()) / (len(instances) - index)
    outputs.append(search(instance["input"]["examples"], time.process_time() + share))
answer(outputs)
"""


def test_every_hidden_program_has_one_literal_step_and_reproduces_its_examples() -> None:
    task = find_task("dsl")
    items = task.builder.build_split(random.Random(3), 300, set())
    for item in items:
        steps = task.builder.dsl.parse(item["label"]["program"])
        assert steps and 2 <= len(steps) <= 3
        assert [literal is not None for _, literal in steps] == [False] * (len(steps) - 1) + [True]
        assert task.scorer.score(item, item["label"]["program"]) == 1.0


@pytest.mark.slow
def test_a_model_free_search_within_the_harness_cpu_budget_stays_below_the_reference(
        tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    task = find_task("dsl")
    ensure_splits(task)
    seconds = task.spec.components.harness.cpu_limit_seconds(task.spec.splits.val) - 3
    harness = write_harness(tmp_path / "search", SEARCH.replace("SECONDS", str(seconds)))
    shutil.copy(task.root / "public" / "harness" / "dsl.py", harness / "dsl.py")
    result = evaluate(task, tiny_model, "val", harness_dir=harness)
    assert result.error is None and result.n == task.spec.splits.val
    assert result.score < REFERENCE_VAL / 2
