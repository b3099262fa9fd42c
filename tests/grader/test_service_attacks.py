"""A candidate harness that attacks from inside its validation sandbox, through the real
grader: every attempt fails, and the validation that recorded them is in the ledger."""

import json
import socket
import threading
from pathlib import Path

import pytest

from tests.evaluation.conftest import write_harness
from tests.grader.conftest import GraderProcess
from vtbench.grader import Ledger
from vtbench.tasks.store import split_path

ATTACKS = """
import socket
def attempt(action):
    try:
        action()
        return "allowed"
    except Exception as err:
        return type(err).__name__
def write_outside():
    with open({escape!r}, "w") as out:
        out.write("escaped")
results = {{
    "read_labels": attempt(lambda: open({labels!r}).read()),
    "list_private_store": attempt(lambda: __import__("os").listdir({home!r})),
    "write_outside": attempt(write_outside),
    "connect_host": attempt(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2)),
}}
answer([json.dumps(results)] * len(instances))
"""


@pytest.mark.slow  # one real validation (~10-20 s on the shared 2-core machine)
def test_harness_cannot_read_labels_write_outside_or_reach_the_network(
    grader: GraderProcess, small_task: Path, workspace: Path, private_store: Path
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    connections: list[object] = []
    threading.Thread(target=lambda: connections.append(listener.accept()), daemon=True).start()
    escape = workspace / "escaped.txt"
    write_harness(workspace / "harness", ATTACKS.format(
        escape=str(escape), labels=str(split_path("dsl", "val")), home=str(private_store),
        port=listener.getsockname()[1]))
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace))

    shown = agent.post("/v1/validations", json={"model": "models/good", "harness": "harness"})
    assert shown.status_code == 200, shown.text
    assert shown.json()["harness"] == "candidate"
    outcomes = json.loads(shown.json()["instances"][0]["output"])
    assert set(outcomes) == {"read_labels", "list_private_store", "write_outside",
                             "connect_host"}
    assert "allowed" not in outcomes.values(), outcomes
    assert not escape.exists() and connections == []
    recorded = Ledger().validation(shown.json()["id"]).result
    assert recorded is not None and recorded["instances"][0]["output"] == json.dumps(outcomes)
    listener.close()
