"""A real process that drives validations through the ledger, for the kill -9 tests.

    python ledger_worker.py DB EPISODE OUTCOME new      reserve one validation and run it
    python ledger_worker.py DB EPISODE OUTCOME drain    run every queued validation

OUTCOME is ``complete`` or ``fail_candidate``. The crash hook (VTBENCH_GRADER_CRASH_AT)
inside the ledger decides where the process dies.
"""

import sys
from pathlib import Path

from vtbench.grader import Ledger

INPUTS = {"model_hash": "m" * 64, "harness_hash": "h" * 64, "split": "val"}


def settle(ledger: Ledger, validation_id: int, outcome: str) -> None:
    if outcome == "complete":
        ledger.complete(validation_id, {"score": 0.25}, compute_seconds=1.5)
    else:
        ledger.fail_candidate(validation_id, "harness crashed", compute_seconds=1.5)


def main() -> None:
    db, episode, outcome, mode = sys.argv[1:5]
    ledger = Ledger(Path(db))
    if mode == "new":
        validation_id = ledger.reserve_validation(episode, INPUTS)
        ledger.start(validation_id)
        settle(ledger, validation_id, outcome)
        return
    while (validation := ledger.claim_next()) is not None:
        settle(ledger, validation.id, outcome)


if __name__ == "__main__":
    main()
