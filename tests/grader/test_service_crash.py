"""kill -9 of the real grader process at each point of a validation, then a restart.

The grader kills itself with SIGKILL at the point named by ``VTBENCH_GRADER_CRASH_AT``
(the test hook in :mod:`vtbench.grader.faults`). The restarted grader recovers the ledger
and its worker finishes the requeued validation: in the end it is completed and charged
exactly once, and the ledger is consistent.
"""

import time
from pathlib import Path

import httpx
import pytest

from tests.grader.conftest import GraderProcess
from vtbench.grader import Ledger

POINTS = ["queued", "model_loading", "harness_running", "scored", "writing_result"]


def crash_then_recover(grader: GraderProcess, task: Path, workspace: Path, point: str) -> None:
    grader.start(crash_at=point)
    token = grader.create_episode(task, workspace, validations=3)
    with pytest.raises(httpx.TransportError):
        grader.client(token).post("/v1/validations", json={"model": "models/good"})
    assert grader.process is not None and grader.process.wait(timeout=60) == -9

    grader.start()
    agent = grader.client(token)
    deadline = time.monotonic() + 300
    while (shown := agent.get("/v1/validations/1").json())["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, "the requeued validation never finished"
        time.sleep(0.5)
    assert shown["state"] == "completed" and shown["settlement"] == "charged"
    ledger = Ledger()
    assert ledger.check_consistency() == []
    assert ledger.remaining(ledger.validation(1).episode).validations == 2
    charges = [row for row in ledger.export()["budget_rows"]
               if row["op"] == "charge" and row["kind"] == "validation_credit"]
    assert len(charges) == 1
    recovered = [e for e in ledger.events() if e["kind"] == "recovered"]
    assert recovered[-1]["detail"]["requeued"] == [1]


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_grader_killed_at_any_point_finishes_the_validation_once_after_restart(
    grader: GraderProcess, small_task: Path, workspace: Path, point: str
) -> None:
    crash_then_recover(grader, small_task, workspace, point)
