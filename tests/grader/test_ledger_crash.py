"""kill -9 of a real process at each point of a validation's life, then recovery.

The worker process dies at a crash point inside the ledger's own code path (the
``VTBENCH_GRADER_CRASH_AT`` test hook pauses it there; the test delivers SIGKILL from
outside). After ``recover`` and a fresh worker, every validation must be settled exactly
once: charged credits equal completed + failed_candidate, and no reservation is open.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vtbench.grader import EpisodeBudgets, Ledger
from vtbench.grader.faults import CRASH_ENV, PAUSE_ENV

WORKER = Path(__file__).with_name("ledger_worker.py")
LEDGER_POINTS = ["queued", "running", "writing_result", "settled"]


def run_worker(db: Path, outcome: str, mode: str, crash_at: str | None, pause: Path) -> int:
    env = {k: v for k, v in os.environ.items() if k not in (CRASH_ENV, PAUSE_ENV)}
    if crash_at:
        env.update({CRASH_ENV: crash_at, PAUSE_ENV: str(pause)})
    process = subprocess.Popen([sys.executable, str(WORKER), str(db), "ep1", outcome, mode],
                               env=env)
    if crash_at:
        deadline = time.monotonic() + 60
        while not pause.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pause.exists(), "the worker never reached its crash point"
        assert int(pause.read_text()) == process.pid
        os.kill(process.pid, signal.SIGKILL)
        pause.unlink()
    return process.wait(timeout=60)


def assert_settled_exactly_once(ledger: Ledger) -> None:
    validations = ledger.validations("ep1")
    assert all(v.state not in ("queued", "running") for v in validations)
    charged = [v for v in validations if v.state in ("completed", "failed_candidate")]
    charges = [r for r in ledger.export()["budget_rows"]
               if r["kind"] == "validation_credit" and r["op"] == "charge"]
    assert sum(r["amount"] for r in charges) == sum(v.credit for v in charged)
    assert ledger.remaining("ep1").validations == 5 - len(charged)
    assert ledger.check_consistency() == []


@pytest.mark.parametrize("outcome", ["complete", "fail_candidate"])
@pytest.mark.parametrize("point", LEDGER_POINTS)
def test_kill_at_any_point_then_recover_settles_each_validation_once(
    tmp_path: Path, point: str, outcome: str
) -> None:
    ledger = Ledger()
    ledger.create_episode("ep1", "mini", "tok", EpisodeBudgets(validations=5, compute_seconds=60))
    pause = tmp_path / "paused"
    assert run_worker(ledger.path, outcome, "new", point, pause) == -signal.SIGKILL
    assert ledger.check_consistency() == []  # even before recovery, nothing is half-written

    report = ledger.recover(inputs_intact=lambda inputs: True)
    settled_before_crash = point == "settled"
    assert report.requeued == ([] if settled_before_crash else [1])
    assert run_worker(ledger.path, outcome, "drain", None, pause) == 0

    assert_settled_exactly_once(ledger)
    expected = "completed" if outcome == "complete" else "failed_candidate"
    assert ledger.validation(1).state == expected
    started_before_crash = point in ("running", "writing_result")
    assert ledger.validation(1).attempts == (2 if started_before_crash else 1)


@pytest.mark.parametrize("point", ["queued", "running", "writing_result"])
def test_validation_whose_inputs_are_gone_is_refunded_on_recovery(
    tmp_path: Path, point: str
) -> None:
    ledger = Ledger()
    ledger.create_episode("ep1", "mini", "tok", EpisodeBudgets(validations=5, compute_seconds=60))
    assert run_worker(ledger.path, "complete", "new", point, tmp_path / "p") == -signal.SIGKILL

    report = ledger.recover(inputs_intact=lambda inputs: False)
    assert report.refunded == [1]
    validation = ledger.validation(1)
    assert (validation.state, validation.settlement) == ("failed_infra", "refunded")
    assert "inputs no longer intact" in (validation.error or "")
    assert_settled_exactly_once(ledger)
    assert ledger.recover(inputs_intact=lambda inputs: True).model_dump()["requeued"] == []


def test_validation_that_keeps_crashing_the_grader_is_refunded_after_its_attempts(
    tmp_path: Path,
) -> None:
    ledger = Ledger()
    ledger.create_episode("ep1", "mini", "tok", EpisodeBudgets(validations=5, compute_seconds=60))
    pause = tmp_path / "p"
    assert run_worker(ledger.path, "complete", "new", "running", pause) == -signal.SIGKILL
    for _ in range(2):
        assert ledger.recover(inputs_intact=lambda inputs: True).requeued == [1]
        assert run_worker(ledger.path, "complete", "drain", "running", pause) == -signal.SIGKILL
    report = ledger.recover(inputs_intact=lambda inputs: True, max_attempts=3)
    assert report.refunded == [1]
    assert "gave up after 3 attempts" in (ledger.validation(1).error or "")
    assert_settled_exactly_once(ledger)
