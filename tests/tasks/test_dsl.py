"""The dsl task needs the model: a search of the documented programs without it, within the
harness's CPU budget, scores far below the reference system. The reference's trainer shows
every program of the data on new words, and still trains."""

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.evaluation.conftest import tiny_model, write_harness  # noqa: F401
from vtbench.evaluation import evaluate
from vtbench.layout import REPO_ROOT
from vtbench.tasks import find_task
from vtbench.tasks.store import ensure_splits
from vtbench.tasks.tiny_reference import read_rows

# The reference system's val score (README, Calibration: the mean of three seeds).
REFERENCE_VAL = 0.443

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


def reference_trainer(folder: Path) -> Path:
    task = find_task("dsl")
    trainer = shutil.copytree(REPO_ROOT / "tasks" / "_tiny" / "trainer", folder / "trainer")
    task.reference.apply_trainer(trainer, task)
    return trainer


def test_the_reference_trainer_shows_every_program_that_runs_on_two_more_sets_of_words(
        tmp_path: Path) -> None:
    task = find_task("dsl")
    rows = read_rows(task.root / "public" / "data")
    script = ("import json, sys\nfrom fresh_examples import with_fresh_examples\n"
              "print(json.dumps(with_fresh_examples(json.load(sys.stdin), seed=0)))")
    done = subprocess.run([sys.executable, "-c", script], cwd=reference_trainer(tmp_path),
                          input=json.dumps(rows), capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout)
    runs = [task.builder.dsl.parse(row["completion"]) is not None for row in rows]
    assert len(seen) == 3 * sum(runs) + runs.count(False)
    assert 0.8 < sum(runs) / len(rows) < 0.95  # the rows in other syntaxes only once
    fresh = [row for row in seen if row not in rows]
    assert len(fresh) == 2 * sum(runs)
    for row in fresh:
        program = row["completion"].strip()
        for source, target in task.builder.row_input(row)["examples"]:
            assert task.builder.dsl.run(program, source) == target


@pytest.mark.slow
def test_the_reference_trainer_trains(tmp_path: Path) -> None:
    trainer = reference_trainer(tmp_path)
    config = (trainer / "config.toml").read_text().replace("steps = 400", "steps = 2")
    (trainer / "config.toml").write_text(config)
    data = shutil.copytree(find_task("dsl").root / "public" / "data", tmp_path / "data")
    done = subprocess.run(
        [sys.executable, "trainer/train.py", "--base", str(REPO_ROOT / "models" / "tiny-base"),
         "--data", str(data), "--out", "model"], cwd=tmp_path, capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    log = json.loads((tmp_path / "model" / "train_log.json").read_text())
    assert log["rows"] > 2 * len(read_rows(data))
