"""The harness evaluation under the docker backend gives exactly bwrap's result."""

from pathlib import Path

from tests.evaluation.test_evaluate import some_items
from tests.sandbox.helpers import docker_or_skip
from vtbench.evaluation import evaluate
from vtbench.tasks import find_task


def test_an_evaluation_under_docker_scores_exactly_as_under_bwrap(tiny_model: Path) -> None:
    docker_or_skip()
    task = find_task("arith")
    items = some_items("arith", 8)
    under_bwrap = evaluate(task, tiny_model, "val", items=items, sandbox="bwrap")
    under_docker = evaluate(task, tiny_model, "val", items=items, sandbox="docker")
    assert under_bwrap.error is None and under_docker.error is None, under_docker.error
    assert under_docker.n == under_bwrap.n == len(items)
    # Greedy decoding: the same model and harness give the same text, call by call.
    assert [i.output for i in under_docker.instances] == [i.output for i in under_bwrap.instances]
    assert [i.score for i in under_docker.instances] == [i.score for i in under_bwrap.instances]
    assert under_docker.score == under_bwrap.score
    assert all(i.trajectory["calls"] for i in under_docker.instances)
