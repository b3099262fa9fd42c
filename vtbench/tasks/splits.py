"""Train/test disjointness: the normalised inputs of a task's public training data.

A task's builder defines ``normalize(input) -> str``; a split item whose normalised input
equals that of any public training row is never drawn. Public rows are read back through
the builder's ``row_input(row)`` (the inverse of the prompt format) when it has one.
"""

import json

from vtbench.tasks.registry import Task


def public_training_rows(task: Task) -> list[dict]:
    rows = []
    for source in task.spec.components.data.sources:
        for path in sorted((task.root / source).rglob("*.jsonl")):
            rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def public_exclusions(task: Task) -> set[str]:
    keys = set()
    for row in public_training_rows(task):
        instance_input = task.builder.row_input(row)
        if instance_input is not None:
            keys.add(task.builder.normalize(instance_input))
    return keys
