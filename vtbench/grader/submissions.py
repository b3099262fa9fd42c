"""The one submission: recorded with an acknowledgement only, scored once on the test
split when the episode finishes.

The answer to the agent names the stored hashes and nothing about the test. Scoring:
a submission that is the initial system itself gets the test score prepare measured
(the gain is defined against that measurement). A failure is judged as a validation's is
(:mod:`vtbench.grader.blame`): the candidate's scores 0; the grader's leaves the submission
pending, so finishing again scores it. The verdict is a ``failure_cause`` event.
"""

import logging
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from vtbench.errors import GraderUnavailable, SnapshotRefused, VtbenchError
from vtbench.grader.api import SubmissionAck
from vtbench.grader.blame import describe, initial_system_control, judge
from vtbench.grader.candidates import kept_snapshot, last_snapshot, take
from vtbench.grader.ledger import Episode, Ledger
from vtbench.grader.lineage import LineageBook, Snapshot, candidate_name
from vtbench.grader.pipeline import PRISTINE, episode_cores, evaluate_stored, prepared_for
from vtbench.grader.storekeeper import StoreKeeper

if TYPE_CHECKING:
    from vtbench.prepare import PreparedTask

log = logging.getLogger("vtbench.grader")


class Submissions:
    def __init__(self, ledger: Ledger, store: StoreKeeper, lineage: LineageBook,
                 sandbox: str) -> None:
        self.ledger = ledger
        self.store = store
        self.lineage = lineage
        self.sandbox = sandbox

    def submit(self, episode: Episode, model: str, harness: str | None = None) -> SubmissionAck:
        """Record the one submission; the answer says nothing about the test."""
        name = candidate_name(model)
        self.ledger.check_can_submit(episode.id)
        editable = prepared_for(episode).task.spec.harness_editable
        with self.store.request(episode):
            stored_model, stored_harness = take(self.ledger, self.store, episode, model,
                                                harness, editable)
            harness_hash = stored_harness.hash if stored_harness else PRISTINE
            try:
                self.ledger.record_submission(episode.id, stored_model.hash, harness_hash)
            except VtbenchError:
                self.store.discard_unused(episode.id, [c.hash for c in (
                    stored_model, stored_harness) if c is not None])
                raise
            taken = self._snapshot(episode, name)
            self.lineage.see(episode, name, stored_model, "submission", lambda: taken)
            self.ledger.log_event(episode.id, "submission_snapshot", candidate=name,
                                  snapshot=taken.commit if taken else None)
        return SubmissionAck(episode=episode.id, model_hash=stored_model.hash,
                             harness_hash=harness_hash)

    def _snapshot(self, episode: Episode, name: str) -> Snapshot | None:
        """The submission's snapshot; the submission is recorded already, so a snapshot
        refused (over the store quota) leaves it the latest one taken, with an event."""
        try:
            with kept_snapshot(episode, f"submit {name}", self.store) as take_snapshot:
                return take_snapshot()
        except SnapshotRefused as err:
            self.ledger.log_event(episode.id, "snapshot_refused", candidate=name,
                                  error=err.one_line())
            return last_snapshot(episode)

    def score_pending(self, episode_id: str) -> None:
        """Score the episode's submission on the test split, if one waits for it."""
        submission = self.ledger.submission(episode_id)
        if submission is not None and submission.state == "pending":
            self._score(episode_id, submission.model_hash, submission.harness_hash)

    def _score(self, episode_id: str, model_hash: str, harness_hash: str) -> None:
        prepared = prepared_for(self.ledger.episode(episode_id))
        known = initial_test_score(prepared, model_hash, harness_hash)
        if known is not None:
            self.ledger.set_submission_result(episode_id, "scored", {
                "score": known, "source": "the initial system, as scored by prepare"})
            return
        cores = episode_cores(self.ledger, episode_id)
        try:
            result, _ = evaluate_stored(prepared.task, "test", model_hash, harness_hash,
                                        self.sandbox, cores=cores)
        except Exception as err:
            verdict = judge(err, initial_system_control(prepared, self.sandbox, cores))
            trace = "".join(traceback.format_exception(err))
            self.ledger.log_event(episode_id, "failure_cause", stage="submission scoring",
                                  **verdict.event(), error=describe(err), traceback=trace)
            if not verdict.refunded:
                self.ledger.set_submission_result(episode_id, "failed", {
                    "score": 0.0, "error": describe(err)})
                return
            log.error("scoring the submission of %s failed in the grader (%s): %s",
                      episode_id, verdict.cause, trace)
            self.ledger.log_event(episode_id, "grader_failure", stage="submission scoring",
                                  cause=verdict.cause, traceback=trace)
            raise GraderUnavailable("scoring failed in the grader; finish again") from err
        self.ledger.set_submission_result(episode_id, "scored", result)


def initial_test_score(prepared: "PreparedTask", model_hash: str,
                       harness_hash: str) -> float | None:
    """The test score prepare measured, when the submission is the initial system itself:
    the initial model's bytes with the task's own harness, whether the grader ran it
    (``pristine``) or the agent sent its bytes unchanged under any folder name."""
    from vtbench.grader.intake import intake

    if intake(prepared.initial_model, "model").hash != model_hash:
        return None
    if harness_hash not in (PRISTINE, pristine_harness_hash(prepared)):
        return None
    return prepared.initial_test


def pristine_harness_hash(prepared: "PreparedTask") -> str:
    """The tree hash of the task's own harness, as an agent's unchanged copy hashes (a
    scratch store: nothing enters the candidate store)."""
    from vtbench.grader.intake import intake
    from vtbench.tasks.materialize import materialize

    with tempfile.TemporaryDirectory(prefix="vtbench-pristine-") as scratch:
        materialize(prepared.task, Path(scratch), components=("harness",))
        return intake(Path(scratch) / "harness", "harness",
                      store=Path(scratch) / "store").hash
