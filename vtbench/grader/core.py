"""The grader core: one object that wires the grader's parts together for one host.

Transport-neutral: :mod:`vtbench.grader.app` puts HTTP on top; tests may call it directly.
Each role lives in its own module:

* :mod:`~vtbench.grader.tokens`: episode and operator tokens, denials;
* :mod:`~vtbench.grader.validations`: a validation request (budget check, intake,
  snapshot, reservation, waiting);
* :mod:`~vtbench.grader.worker`: the threads that run and settle queued validations;
* :mod:`~vtbench.grader.submissions`: the one submission and its test scoring;
* :mod:`~vtbench.grader.merge`: merges of candidates into a new workspace folder;
* :mod:`~vtbench.grader.results`: the operator's status, test results and histories.

Trusts: the ledger and result cache (SQLite in the private store), the private store
itself (splits, secrets, the candidate store), the task packs' trusted code (builder,
scorer), the evaluation pipeline (:mod:`vtbench.evaluation`: our model server, the
sandbox, the scorer) and its own worker threads.

Does not trust: callers (an episode token reaches only that episode's own budget,
validations and submission, and never a test item or test score; the operator token is
separate), candidate directories (copied through :mod:`vtbench.grader.intake` before
anything runs, so later workspace edits change nothing), and anything a harness writes
(scored by the trusted scorer, recorded per instance).

Every validation goes through the ledger: reserved before any work (atomically, see
:mod:`vtbench.grader.ledger`), run by a worker that claims it, and settled once: charged
when it completes or fails because of the candidate, refunded when we fail. After a crash
:meth:`Grader.start` recovers the ledger and the workers resume the queued work.

Every candidate the grader sees (``models/initial`` at episode creation, each validated,
submitted or merged folder) gets a lineage record kept by the grader alone
(:mod:`vtbench.grader.lineage`).
"""

import logging
import secrets
from pathlib import Path

from vtbench.grader import results
from vtbench.grader.api import (
    CandidateView,
    EpisodeBudgets,
    EpisodeGrant,
    EpisodeHistory,
    EpisodeStatus,
    MergeRequest,
    MergeResult,
    OperatorStatus,
    SubmissionAck,
    SubmittedHashes,
    TestResult,
    ValidationView,
)
from vtbench.grader.cache import ResultCache
from vtbench.grader.ledger import Episode, Ledger, RecoveryReport
from vtbench.grader.lineage import LineageBook, candidate_views
from vtbench.grader.merge import Merger
from vtbench.grader.pipeline import SPEC_EVENT, episode_budgets, inputs_intact, remember_prepared
from vtbench.grader.storekeeper import StoreKeeper
from vtbench.grader.submissions import Submissions
from vtbench.grader.tokens import Gate, new_token
from vtbench.grader.validations import Validations, view
from vtbench.grader.worker import Workers
from vtbench.spec import EpisodeSpec

log = logging.getLogger("vtbench.grader")


class Grader:
    """One per host; serves many episodes. Call :meth:`start` before use."""

    def __init__(self, ledger: Ledger | None = None, cache: ResultCache | None = None,
                 sandbox: str = "bwrap", workers: int = 1, gpus: int = 0) -> None:
        self.ledger = ledger or Ledger()
        self.cache = cache or ResultCache(self.ledger.path)
        self.sandbox = sandbox
        self.lineage = LineageBook(self.ledger.path)
        self.store = StoreKeeper(self.ledger)
        self.merger = Merger(self.ledger, self.lineage, self.store)
        self.gate = Gate(self.ledger)
        self.workers = Workers(self.ledger, self.cache, sandbox, workers, gpus)
        self.validations = Validations(self.ledger, self.cache, self.store, self.lineage,
                                       self.workers.changed)
        self.submissions = Submissions(self.ledger, self.store, self.lineage, sandbox)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> RecoveryReport:
        """Settle what a crash left open, then start the workers (queued work resumes)."""
        from vtbench.evaluation.standby import replenish
        from vtbench.sandbox import get_sandbox

        self.store.sweep()
        report = self.ledger.recover(inputs_intact=inputs_intact)
        log.info("recovered: %s", report.model_dump())
        if self.sandbox == "bwrap":
            replenish(get_sandbox(self.sandbox))  # the first validation's harness sandbox
        self.workers.start()
        return report

    def stop(self, grace_seconds: float = 2.0) -> None:
        """Stop taking work. An evaluation still running after the grace period is left
        to die with the process; the next :meth:`start` requeues it (crash-safe anyway)."""
        self.workers.stop(grace_seconds)

    # -- authentication ----------------------------------------------------------------

    def authenticate(self, token: str | None) -> Episode:
        return self.gate.authenticate(token)

    def authorize_operator(self, token: str | None) -> None:
        self.gate.authorize_operator(token)

    def record_denial(self, route: str, reason: str, episode: str | None = None) -> None:
        self.gate.record_denial(route, reason, episode)

    # -- operator ----------------------------------------------------------------------

    def create_episode(self, task: str, digest: str, workspace: Path,
                       budgets: EpisodeBudgets | None = None,
                       spec: EpisodeSpec | None = None) -> EpisodeGrant:
        """An episode on the task prepared under id ``task`` from the pack ``digest`` (the
        runner checked it); the ledger keeps both, never a path, and ``spec`` whole, whose
        budgets the episode gets (else the task's)."""
        from vtbench.prepare import prepared_by_id

        prepared = prepared_by_id(task, digest)
        budgets = budgets or episode_budgets(prepared, spec)
        token, hashed = new_token()
        episode_id = f"ep-{secrets.token_hex(6)}"
        self.ledger.create_episode(episode_id, task, hashed, budgets,
                                   workspace=str(workspace.resolve()), task_digest=digest)
        remember_prepared(episode_id, prepared, spec)
        if spec is not None:
            self.ledger.log_event(episode_id, SPEC_EVENT, spec=spec.model_dump(mode="json"))
            self._standby_on(spec.cores)
        self.lineage.record_initial(episode_id, workspace.resolve())
        return EpisodeGrant(episode=episode_id, token=token)

    def _standby_on(self, cores: list[int] | None) -> None:
        """Start the harness sandbox of the episode's first validation, on its cores."""
        from vtbench.evaluation.standby import replenish
        from vtbench.sandbox import get_sandbox

        if cores and self.sandbox == "bwrap":
            replenish(get_sandbox(self.sandbox), cores)

    def operator_status(self) -> OperatorStatus:
        return results.operator_status(self.ledger)

    def finish_episode(self, episode_id: str) -> TestResult:
        """Close the episode (its intakes stop, its requests end) and score its submission
        on the test split (once)."""
        self.ledger.episode(episode_id)
        self.ledger.close_episode(episode_id)
        self.store.close(episode_id)
        self.submissions.score_pending(episode_id)
        return self.test_result(episode_id)

    def test_result(self, episode_id: str) -> TestResult:
        return results.test_result(self.ledger, episode_id)

    def history(self, episode_id: str) -> EpisodeHistory:
        """Operator only: validations and submission in the episode record's shape."""
        return results.history(self.ledger, self.lineage, episode_id)

    # -- episode routes ----------------------------------------------------------------

    def status(self, episode: Episode) -> EpisodeStatus:
        left = self.ledger.remaining(episode.id)
        submission = self.ledger.submission(episode.id)
        return EpisodeStatus(
            episode=episode.id, task=episode.task, status=episode.status,
            validations_left=left.validations, compute_seconds_left=left.compute_seconds,
            validations=[view(v) for v in self.ledger.validations(episode.id)],
            submitted=submission is not None,
            submission=SubmittedHashes(model_hash=submission.model_hash,
                                       harness_hash=submission.harness_hash)
            if submission else None)

    def validate(self, episode: Episode, model: str, harness: str | None = None,
                 wait: bool = True, timeout: float = 3600.0) -> ValidationView:
        return self.validations.validate(episode, model, harness, wait, timeout)

    def validation(self, episode: Episode, validation_id: int) -> ValidationView:
        return self.validations.validation(episode, validation_id)

    def submit(self, episode: Episode, model: str, harness: str | None = None) -> SubmissionAck:
        return self.submissions.submit(episode, model, harness)

    def models(self, episode: Episode) -> list[CandidateView]:
        """The episode's candidates with their lineage and best validation score so far."""
        return candidate_views(self.lineage.candidates(episode.id),
                               self.ledger.validations(episode.id))

    def merge(self, episode: Episode, request: MergeRequest) -> MergeResult:
        """Merge candidates into a new workspace folder; costs no validation credit."""
        return self.merger.merge(episode, request)

