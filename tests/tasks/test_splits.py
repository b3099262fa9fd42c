import json

import pytest

from vtbench.tasks import builtin_tasks
from vtbench.tasks.splits import public_exclusions, public_training_rows
from vtbench.tasks.store import build_splits

TINY_TASKS = [t for t in builtin_tasks() if t.spec.scale == "tiny"]


@pytest.mark.parametrize("task", TINY_TASKS, ids=lambda t: t.id)
def test_no_split_item_appears_in_the_public_training_data(task) -> None:
    splits = build_splits(task, secret=b"s" * 32)
    public = public_exclusions(task)
    assert public, "the public data should map back to instance inputs"
    for split, items in splits.items():
        keys = {task.builder.normalize(item["input"]) for item in items}
        assert not keys & public, f"{split} overlaps the training data"
        assert len(keys) == len(items), f"{split} holds near-duplicates of itself"


@pytest.mark.parametrize("task", TINY_TASKS, ids=lambda t: t.id)
def test_val_and_test_are_disjoint_and_sized_by_the_spec(task) -> None:
    splits = build_splits(task, secret=b"k" * 32)
    val = {task.builder.normalize(item["input"]) for item in splits["val"]}
    test = {task.builder.normalize(item["input"]) for item in splits["test"]}
    assert not val & test
    assert len(splits["val"]) == task.spec.splits.val
    assert len(splits["test"]) == task.spec.splits.test


@pytest.mark.parametrize("task", TINY_TASKS, ids=lambda t: t.id)
def test_splits_depend_on_the_secret(task) -> None:
    first = build_splits(task, secret=b"a" * 32)["test"]
    again = build_splits(task, secret=b"a" * 32)["test"]
    other = build_splits(task, secret=b"b" * 32)["test"]
    assert first == again
    assert first != other


@pytest.mark.parametrize("task", TINY_TASKS, ids=lambda t: t.id)
def test_committed_public_data_is_what_the_builder_makes(task) -> None:
    rows = public_training_rows(task)
    assert [json.dumps(r, sort_keys=True) for r in rows] == [
        json.dumps(r, sort_keys=True) for r in task.builder.public_rows()
    ]



@pytest.mark.parametrize("task", TINY_TASKS, ids=lambda t: t.id)
def test_every_public_row_fits_the_tiny_trainer_context(task) -> None:
    longest = max(len(row["prompt"]) + len(row["completion"]) for row in task.builder.public_rows())
    assert longest + 2 <= 192  # bos and eos, one token per character
