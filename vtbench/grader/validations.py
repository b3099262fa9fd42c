"""The request side of a validation: check the budget, intake the candidate, snapshot,
reserve, and (if asked) wait until a worker has settled it.

Budget and episode state are checked before anything is copied or committed; a request
refused after its intake (a free repeat that was not one, a concurrent request that took
the last credit) leaves no unused tree in the store and no snapshot in the history. A
repeat whose result is cached takes no snapshot (it names the latest), so repeats, free
or not, cannot grow the history; every other snapshot is bounded by the episode's store
quota. An
episode sees only its own validations (another episode's id is "not found").
"""

import threading
import time

from vtbench.errors import NotFound, VtbenchError
from vtbench.grader.api import ValidationView
from vtbench.grader.cache import CacheKey, ResultCache
from vtbench.grader.candidates import kept_snapshot, last_snapshot, take
from vtbench.grader.intake import StoredCandidate
from vtbench.grader.ledger import Episode, Ledger, Validation
from vtbench.grader.lineage import LineageBook, candidate_name
from vtbench.grader.pipeline import PRISTINE, cache_key, prepared_for
from vtbench.grader.storekeeper import StoreKeeper


def view(validation: Validation) -> ValidationView:
    result = validation.result or {}
    return ValidationView(
        id=validation.id, state=validation.state, score=result.get("score"), n=result.get("n"),
        harness=result.get("harness"), decoding=result.get("decoding"),
        instances=result.get("instances", []), error=validation.error or result.get("error"),
        cached=bool(result.get("cached")), credit=validation.credit,
        settlement=validation.settlement, gpus=result.get("gpus", 0),
        model=validation.inputs.get("candidate"),
        harness_folder=validation.inputs.get("harness_candidate"))


class Validations:
    """Queues validations for the workers and answers for them; ``changed`` is the
    workers' condition (notified when one is queued, waited on until one settles)."""

    def __init__(self, ledger: Ledger, cache: ResultCache, store: StoreKeeper,
                 lineage: LineageBook, changed: threading.Condition) -> None:
        self.ledger = ledger
        self.cache = cache
        self.store = store
        self.lineage = lineage
        self.changed = changed

    def validate(self, episode: Episode, model: str, harness: str | None = None,
                 wait: bool = True, timeout: float = 3600.0) -> ValidationView:
        """Queue a validation of (model, harness) on the validation split; wait for it."""
        task = prepared_for(episode).task
        repeat_is_free = not task.spec.budgets.repeat_validation_costs_credit
        self.ledger.check_can_validate(episode.id, credit=0 if repeat_is_free else 1)
        with self.store.request(episode):
            stored_model, stored_harness = take(self.ledger, self.store, episode, model,
                                                harness, task.spec.harness_editable)
            key = cache_key(episode.id, task, "val", stored_model.hash,
                            stored_harness.hash if stored_harness else PRISTINE)
            repeat = self.cache.get(key) is not None
            credit = 0 if repeat_is_free and repeat else 1
            trees = [c.hash for c in (stored_model, stored_harness) if c is not None]
            try:
                self.ledger.check_can_validate(episode.id, credit)
                harness_named = candidate_name(harness) if harness and stored_harness else None
                validation_id = self._reserve(episode, model, stored_model, harness_named, key,
                                              credit, repeat)
            except VtbenchError:
                self.store.discard_unused(episode.id, trees)
                raise
        with self.changed:
            self.changed.notify_all()
        if not wait:
            return view(self.ledger.validation(validation_id))
        return self._wait(validation_id, timeout)

    def _reserve(self, episode: Episode, model: str, stored_model: StoredCandidate,
                 harness: str | None, key: CacheKey, credit: int, repeat: bool) -> int:
        """Snapshot the workspace, reserve the validation, then record the candidate's
        lineage; a refused reservation withdraws its snapshot. A repeat (its result is
        cached: it trains and evaluates nothing new) of a candidate whose lineage is known
        takes no snapshot: it names the latest one."""
        name = candidate_name(model)
        with kept_snapshot(episode, f"validate {name}", self.store) as take_snapshot:
            if repeat and self.lineage.needs_no_snapshot(episode.id, name, stored_model.hash):
                taken = last_snapshot(episode)
            else:
                taken = take_snapshot()
            inputs = {"task": episode.task, "split": "val", "model_hash": stored_model.hash,
                      "harness_hash": key.harness_hash, "candidate": name,
                      "harness_candidate": harness,
                      "snapshot": taken.commit if taken else None}
            validation_id = self.ledger.reserve_validation(episode.id, inputs, credit=credit)
        self.lineage.see(episode, name, stored_model, "validation", lambda: taken)
        return validation_id

    def _wait(self, validation_id: int, timeout: float) -> ValidationView:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                validation = self.ledger.validation(validation_id)
                if validation.state not in ("queued", "running"):
                    return view(validation)
                if time.monotonic() > deadline:
                    return view(validation)
                self.changed.wait(timeout=1.0)

    def validation(self, episode: Episode, validation_id: int) -> ValidationView:
        try:
            validation = self.ledger.validation(validation_id)
        except VtbenchError:
            raise NotFound(f"no validation {validation_id}") from None
        if validation.episode != episode.id:
            raise NotFound(f"validation {validation_id} belongs to another episode")
        return view(validation)
