"""The grader core: episodes, validations, the one submission and operator queries.

Transport-neutral: :mod:`vtbench.grader.app` puts HTTP on top; tests may call it directly.

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
(:mod:`vtbench.grader.lineage`); merges run through :mod:`vtbench.grader.merge`.
"""

import hashlib
import hmac
import logging
import re
import secrets
import subprocess
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from vtbench import layout
from vtbench.errors import (
    CheckpointError,
    GraderUnavailable,
    HarnessError,
    NotFound,
    SnapshotRefused,
    Unauthorized,
    VtbenchError,
)
from vtbench.grader import faults
from vtbench.grader.cache import CacheKey, ResultCache
from vtbench.grader.intake import StoredCandidate, intake_from, stored, verify
from vtbench.grader.ledger import Episode, EpisodeBudgets, Ledger, RecoveryReport, Validation
from vtbench.grader.lineage import (
    CandidateView,
    LineageBook,
    Snapshot,
    candidate_name,
    candidate_views,
)
from vtbench.grader.merge import Merger, MergeRequest, MergeResult
from vtbench.grader.storekeeper import StoreKeeper
from vtbench.layout import EpisodePaths

log = logging.getLogger("vtbench.grader")
PRISTINE = "pristine"


def normalised(gain: float | None, spread: float | None) -> float | None:
    """Gain over (reference - initial); a gain of exactly 0 is 0 even where they tie."""
    if gain is None:
        return None
    if gain == 0:
        return 0.0
    return gain / spread if spread else None


def without_store_paths(message: str) -> str:
    """``<store>/<hash>/files/config.json`` becomes ``config.json``, the bare tree
    ``the candidate``: store paths name the host's private store."""
    store = layout.candidate_store()
    for spelling in {str(store), str(store.resolve())}:
        message = re.sub(re.escape(spelling) + r"/[0-9a-f]{64}/files/", "", message)
        message = re.sub(re.escape(spelling) + r"(/[^\s:]*)?", "the candidate", message)
    return message


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def operator_token() -> str:
    """The operator token of this installation, created (0600) on first use."""
    path = layout.grader_home() / "operator-token"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(secrets.token_urlsafe(32))
        tmp.chmod(0o600)
        tmp.replace(path)
    return path.read_text().strip()


def operator_status(ledger: Ledger) -> dict[str, Any]:
    """Episodes, their remaining budgets, open validations and ledger consistency; needs only
    the ledger, so the operator's ``grader status`` reads it without a grader."""
    episodes = []
    for episode in ledger.episodes():
        left = ledger.remaining(episode.id)
        submission = ledger.submission(episode.id)
        episodes.append({"episode": episode.id, "task": episode.task,
                         "status": episode.status, **left.model_dump(),
                         "submission": submission.state if submission else None})
    queued = [v.id for v in ledger.validations() if v.state in ("queued", "running")]
    return {"episodes": episodes, "open_validations": queued,
            "consistency": ledger.check_consistency()}


class View(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EpisodeGrant(View):
    episode: str
    token: str
    """Shown once; the grader keeps only its hash."""


class ValidationView(View):
    """What an episode sees of one of its validations."""

    id: int
    state: str
    score: float | None = None
    n: int | None = None
    harness: str | None = None
    """``candidate``, or ``pristine`` when the task's fixed harness ran whatever was sent."""
    decoding: dict[str, Any] | None = None
    instances: list[dict[str, Any]] = []
    error: str | None = None
    cached: bool = False
    credit: int
    settlement: str | None = None


class EpisodeStatus(View):
    episode: str
    task: str
    status: str
    validations_left: int
    compute_seconds_left: float
    validations: list[ValidationView]
    submitted: bool
    submission: dict[str, str] | None
    """The submitted hashes (never a test score)."""


class SubmissionAck(View):
    episode: str
    model_hash: str
    harness_hash: str
    received: Literal[True] = True


class TestResult(View):
    """Operator only: the submission's test score and its gain over the initial system."""

    __test__ = False  # not a pytest class
    episode: str
    task: str
    state: str
    test_score: float | None
    initial: float | None
    reference: float | None
    gain: float | None
    normalised_gain: float | None
    error: str | None = None


def view(validation: Validation) -> ValidationView:
    result = validation.result or {}
    return ValidationView(
        id=validation.id, state=validation.state, score=result.get("score"), n=result.get("n"),
        harness=result.get("harness"), decoding=result.get("decoding"),
        instances=result.get("instances", []), error=validation.error or result.get("error"),
        cached=bool(result.get("cached")), credit=validation.credit,
        settlement=validation.settlement)


class Grader:
    """One per host; serves many episodes. Call :meth:`start` before use."""

    def __init__(self, ledger: Ledger | None = None, cache: ResultCache | None = None,
                 sandbox: str = "bwrap", workers: int = 1) -> None:
        self.ledger = ledger or Ledger()
        self.cache = cache or ResultCache(self.ledger.path)
        self.sandbox = sandbox
        self.lineage = LineageBook(self.ledger.path)
        self.merger = Merger(self.ledger, self.lineage)
        self.store = StoreKeeper(self.ledger)
        self._operator_hash = token_hash(operator_token())
        self._workers = workers
        self._threads: list[threading.Thread] = []
        self._changed = threading.Condition()
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> RecoveryReport:
        """Settle what a crash left open, then start the workers (queued work resumes)."""
        from vtbench.evaluation.standby import replenish
        from vtbench.sandbox import get_sandbox

        self.store.sweep()
        report = self.ledger.recover(inputs_intact=self._inputs_intact)
        log.info("recovered: %s", report.model_dump())
        if self.sandbox == "bwrap":
            replenish(get_sandbox(self.sandbox))  # the first validation's harness sandbox
        for index in range(self._workers):
            thread = threading.Thread(target=self._work, name=f"grader-worker-{index}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        return report

    def stop(self, grace_seconds: float = 2.0) -> None:
        """Stop taking work. An evaluation still running after the grace period is left
        to die with the process; the next :meth:`start` requeues it (crash-safe anyway)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        deadline = time.monotonic() + grace_seconds
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    @staticmethod
    def _inputs_intact(inputs: dict[str, Any]) -> bool:
        hashes = [inputs.get("model_hash"), inputs.get("harness_hash")]
        return all(h == PRISTINE or (isinstance(h, str) and verify(h)) for h in hashes)

    # -- authentication ----------------------------------------------------------------

    def authenticate(self, token: str | None) -> Episode:
        episode = self.ledger.episode_for_token(token_hash(token)) if token else None
        if episode is None:
            raise Unauthorized("not authorized: unknown episode token")
        return episode

    def authorize_operator(self, token: str | None) -> None:
        if not token or not hmac.compare_digest(token_hash(token), self._operator_hash):
            raise Unauthorized("not authorized: not the operator token")

    def record_denial(self, route: str, reason: str, episode: str | None = None) -> None:
        log.warning("denied %s: %s (episode %s)", route, reason, episode)
        self.ledger.log_event(episode, "denied", route=route, reason=reason)

    # -- operator ----------------------------------------------------------------------

    def create_episode(self, task: str, workspace: Path,
                       budgets: EpisodeBudgets | None = None) -> EpisodeGrant:
        from vtbench.tasks import find_task

        spec_budgets = find_task(task).spec.budgets
        budgets = budgets or EpisodeBudgets(validations=spec_budgets.validations,
                                            compute_seconds=spec_budgets.grader_compute_seconds)
        token = secrets.token_urlsafe(32)
        episode_id = f"ep-{secrets.token_hex(6)}"
        self.ledger.create_episode(episode_id, task, token_hash(token), budgets,
                                   workspace=str(workspace.resolve()))
        self.lineage.record_initial(episode_id, workspace.resolve())
        return EpisodeGrant(episode=episode_id, token=token)

    def operator_status(self) -> dict[str, Any]:
        return operator_status(self.ledger)

    def finish_episode(self, episode_id: str) -> TestResult:
        """Close the episode (its intakes stop, its requests end) and score its submission
        on the test split (once)."""
        self.ledger.episode(episode_id)
        self.ledger.close_episode(episode_id)
        self.store.close(episode_id)
        submission = self.ledger.submission(episode_id)
        if submission is not None and submission.state == "pending":
            self._score_submission(episode_id, submission.model_hash, submission.harness_hash)
        return self.test_result(episode_id)

    def test_result(self, episode_id: str) -> TestResult:
        from vtbench.prepare import score_summary
        from vtbench.tasks import find_task

        episode = self.ledger.episode(episode_id)
        task = find_task(episode.task)
        scores = score_summary(task)
        initial, reference = scores["initial"]["test"], scores["reference"]["test"]
        submission = self.ledger.submission(episode_id)
        result = (submission.result or {}) if submission else {}
        state = submission.state if submission else "no submission"
        final = result.get("score") if submission else initial
        gain = final - initial if final is not None and initial is not None else None
        spread = reference - initial if reference is not None and initial is not None else None
        return TestResult(
            episode=episode_id, task=task.id, state=state, test_score=final, initial=initial,
            reference=reference, gain=gain,
            normalised_gain=normalised(gain, spread),
            error=result.get("error"))

    # -- episode routes ----------------------------------------------------------------

    def status(self, episode: Episode) -> EpisodeStatus:
        left = self.ledger.remaining(episode.id)
        submission = self.ledger.submission(episode.id)
        return EpisodeStatus(
            episode=episode.id, task=episode.task, status=episode.status,
            validations_left=left.validations, compute_seconds_left=left.compute_seconds,
            validations=[view(v) for v in self.ledger.validations(episode.id)],
            submitted=submission is not None,
            submission={"model_hash": submission.model_hash,
                        "harness_hash": submission.harness_hash} if submission else None)

    @staticmethod
    def _workspace(episode: Episode) -> Path:
        if episode.workspace is None:
            raise GraderUnavailable(f"episode {episode.id} has no workspace")
        return Path(episode.workspace)

    def _intake(self, episode: Episode, model: str,
                harness: str | None) -> tuple[StoredCandidate, StoredCandidate | None]:
        """Intake the candidate; the harness only where the task lets the agent change it.
        Call inside ``self.store.request(episode)``."""
        from vtbench.tasks import find_task

        workspace = self._workspace(episode)

        def stop() -> bool:
            return self.store.stopped(episode.id)

        try:
            stored_model = intake_from(workspace, model, "model",
                                       limits=self.store.limits(episode), stop=stop)
            self.store.record(episode.id, stored_model)
            editable = find_task(episode.task).spec.harness_editable
            stored_harness = None
            if editable and harness is not None:
                stored_harness = intake_from(workspace, harness, "harness",
                                             limits=self.store.limits(episode), stop=stop)
                self.store.record(episode.id, stored_harness)
        except VtbenchError as err:
            self.ledger.log_event(episode.id, "candidate_refused", error=err.one_line())
            raise
        return stored_model, stored_harness

    @staticmethod
    def _snapshot(episode: Episode, message: str) -> Snapshot | None:
        """Commit D/T/H into the episode's ``snapshots.git`` beside the workspace, if any."""
        from vtbench.workspace import snapshot

        if episode.workspace is None:
            return None
        workspace = Path(episode.workspace)
        git_dir = EpisodePaths.of_workspace(workspace).snapshots
        if not git_dir.is_dir():
            return None
        try:
            return Snapshot(snapshot(git_dir, workspace, message), git_dir, workspace)
        except (OSError, subprocess.CalledProcessError) as error:
            log.exception("snapshot of %s failed", episode.id)
            raise SnapshotRefused("the workspace could not be snapshotted "
                                  f"({type(error).__name__})",
                                  hint="validate again once the files are written") from error

    def history(self, episode_id: str) -> dict[str, Any]:
        """Operator only: validations and submission in the episode record's shape."""
        episode = self.ledger.episode(episode_id)
        validations = []
        for index, v in enumerate(self.ledger.validations(episode_id), start=1):
            shown = view(v)
            validations.append({
                "index": index, "elapsed_seconds": round(v.created - episode.created, 1),
                "snapshot": v.inputs.get("snapshot") or "", "candidate": v.inputs["candidate"],
                "model_hash": v.inputs["model_hash"], "harness_hash": v.inputs["harness_hash"],
                "score": shown.score if v.state == "completed" else None, "error": shown.error,
                "cached": shown.cached, "charged": v.settlement == "charged" and v.credit > 0,
                "compute_seconds": v.compute_seconds})
        return {"validations": validations, "submission": self._submission_record(episode),
                "candidates": [c.model_dump() for c in self.lineage.candidates(episode_id)]}

    def _submission_record(self, episode: Episode) -> dict[str, Any] | None:
        submission = self.ledger.submission(episode.id)
        if submission is None:
            return None
        detail: dict[str, Any] = next((e["detail"] for e in reversed(self.ledger.events(episode.id))
                       if e["kind"] == "submission_snapshot"), {})
        return {"candidate": detail.get("candidate", ""), "snapshot": detail.get("snapshot") or "",
                "model_hash": submission.model_hash, "harness_hash": submission.harness_hash,
                "elapsed_seconds": round(submission.created - episode.created, 1)}

    def validate(self, episode: Episode, model: str, harness: str | None = None,
                 wait: bool = True, timeout: float = 3600.0) -> ValidationView:
        """Queue a validation of (model, harness) on the validation split; wait for it.

        Budget and episode state are checked before anything is copied or committed; a
        request refused after its intake (a free repeat that was not one, a concurrent
        request that took the last credit) leaves no unused tree in the store."""
        from vtbench.tasks import find_task

        task = find_task(episode.task)
        repeat_is_free = not task.spec.budgets.repeat_validation_costs_credit
        self.ledger.check_can_validate(episode.id, credit=0 if repeat_is_free else 1)
        with self.store.request(episode):
            stored_model, stored_harness = self._intake(episode, model, harness)
            key = self._cache_key(episode.id, task, "val", stored_model.hash,
                                  stored_harness.hash if stored_harness else PRISTINE)
            credit = 0 if repeat_is_free and self.cache.get(key) is not None else 1
            trees = [c.hash for c in (stored_model, stored_harness) if c is not None]
            try:
                self.ledger.check_can_validate(episode.id, credit)
                validation_id = self._reserve(episode, model, stored_model, key, credit)
            except VtbenchError:
                self.store.discard_unused(episode.id, trees)
                raise
        with self._changed:
            self._changed.notify_all()
        if not wait:
            return view(self.ledger.validation(validation_id))
        return self._wait(validation_id, timeout)

    def _reserve(self, episode: Episode, model: str, stored_model: StoredCandidate,
                 key: CacheKey, credit: int) -> int:
        """Snapshot D/T/H, reserve the validation, then record the candidate's lineage."""
        name = candidate_name(model)
        taken = self._snapshot(episode, f"validate {name}")
        inputs = {"task": episode.task, "split": "val", "model_hash": stored_model.hash,
                  "harness_hash": key.harness_hash, "candidate": name,
                  "snapshot": taken.commit if taken else None}
        validation_id = self.ledger.reserve_validation(episode.id, inputs, credit=credit)
        self.lineage.see(episode.id, name, stored_model, "validation", lambda: taken)
        return validation_id

    def _wait(self, validation_id: int, timeout: float) -> ValidationView:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                validation = self.ledger.validation(validation_id)
                if validation.state not in ("queued", "running"):
                    return view(validation)
                if time.monotonic() > deadline:
                    return view(validation)
                self._changed.wait(timeout=1.0)

    def validation(self, episode: Episode, validation_id: int) -> ValidationView:
        try:
            validation = self.ledger.validation(validation_id)
        except VtbenchError:
            raise NotFound(f"no validation {validation_id}") from None
        if validation.episode != episode.id:
            raise NotFound(f"validation {validation_id} belongs to another episode")
        return view(validation)

    def submit(self, episode: Episode, model: str, harness: str | None = None) -> SubmissionAck:
        """Record the one submission; the answer says nothing about the test."""
        name = candidate_name(model)
        self.ledger.check_can_submit(episode.id)
        with self.store.request(episode):
            stored_model, stored_harness = self._intake(episode, model, harness)
            harness_hash = stored_harness.hash if stored_harness else PRISTINE
            try:
                self.ledger.record_submission(episode.id, stored_model.hash, harness_hash)
            except VtbenchError:
                self.store.discard_unused(episode.id, [c.hash for c in (
                    stored_model, stored_harness) if c is not None])
                raise
            taken = self._snapshot(episode, f"submit {name}")
            self.lineage.see(episode.id, name, stored_model, "submission", lambda: taken)
            self.ledger.log_event(episode.id, "submission_snapshot", candidate=name,
                                  snapshot=taken.commit if taken else None)
        return SubmissionAck(episode=episode.id, model_hash=stored_model.hash,
                             harness_hash=harness_hash)

    def models(self, episode: Episode) -> list[CandidateView]:
        """The episode's candidates with their lineage and best validation score so far."""
        return candidate_views(self.lineage.candidates(episode.id),
                               self.ledger.validations(episode.id))

    def merge(self, episode: Episode, request: MergeRequest) -> MergeResult:
        """Merge candidates into a new workspace folder; costs no validation credit."""
        return self.merger.merge(episode.id, self._workspace(episode), request, lambda: (
            self._snapshot(episode, f"merge into {request.out}")))

    # -- workers -----------------------------------------------------------------------

    @staticmethod
    def _cache_key(episode_id: str, task: Any, split: str, model_hash: str,
                   harness_hash: str) -> CacheKey:
        harness_spec = task.spec.components.harness
        decoding = None if harness_spec.editable else harness_spec.decoding.model_dump()
        return CacheKey(episode=episode_id, task=task.id, split=split, model_hash=model_hash,
                        harness_hash=harness_hash, decoding=decoding)

    def _work(self) -> None:
        while True:
            with self._changed:
                if self._stopping:
                    return
            validation = self.ledger.claim_next()
            if validation is None:
                with self._changed:
                    if not self._stopping:
                        self._changed.wait(timeout=0.5)
                continue
            try:
                self._run(validation)
            finally:
                with self._changed:
                    self._changed.notify_all()

    def _evaluate(self, split: str, inputs: dict[str, Any],
                  timeout: float | None = None) -> tuple[dict[str, Any], float]:
        """Run the evaluation pipeline on stored inputs; returns (result, seconds)."""
        from vtbench.evaluation import evaluate
        from vtbench.tasks import find_task

        task = find_task(inputs["task"])
        model = stored(inputs["model_hash"])
        harness = None if inputs["harness_hash"] == PRISTINE else stored(inputs["harness_hash"])
        if model is None or (inputs["harness_hash"] != PRISTINE and harness is None):
            raise GraderUnavailable("a stored candidate went missing")
        faults.checkpoint("model_loading")
        started = time.monotonic()
        result = evaluate(task, model.path, split, harness.path if harness else None,
                          sandbox=self.sandbox, timeout=timeout,
                          on_progress=lambda done, total: faults.checkpoint("harness_running"))
        return result.model_dump(mode="json"), time.monotonic() - started

    def _run(self, validation: Validation) -> None:
        from vtbench.tasks import find_task

        inputs = validation.inputs
        task = find_task(inputs["task"])
        key = self._cache_key(validation.episode, task, inputs["split"], inputs["model_hash"],
                              inputs["harness_hash"])
        cached = self.cache.get(key)
        if cached is not None:
            self.ledger.complete(validation.id, {**cached, "cached": True}, compute_seconds=0.0)
            return
        left = self.ledger.remaining(validation.episode).compute_seconds
        if left <= 0:
            self.ledger.fail_infra(validation.id, "no grader compute seconds left when its "
                                                  "turn came; this validation was refunded")
            return
        started = time.monotonic()
        try:
            result, seconds = self._evaluate(inputs["split"], inputs, timeout=left)
        except (CheckpointError, HarnessError) as err:
            self.ledger.fail_candidate(validation.id, self._for_agent(validation, err.one_line()),
                                       time.monotonic() - started)
            return
        except Exception as err:  # ours (a trusted scorer too), not the candidate's: refund
            self._refund_grader_failure(validation, err)
            return
        faults.checkpoint("scored")
        if result.get("error"):
            result["error"] = self._for_agent(validation, result["error"])
            self.ledger.fail_candidate(validation.id, result["error"], seconds, result=result)
            return
        self.cache.put(key, result)
        self.ledger.complete(validation.id, result, seconds)

    def _for_agent(self, validation: Validation, message: str) -> str:
        """The message without candidate-store paths (the agent knows its candidate by its
        workspace name); the operator finds the original in the log and the ledger."""
        shown = without_store_paths(message)
        if shown != message:
            log.info("validation %s failed: %s", validation.id, message)
            self.ledger.log_event(validation.episode, "candidate_failure_detail",
                                  validation=validation.id, error=message)
        return shown

    def _refund_grader_failure(self, validation: Validation, err: Exception) -> None:
        """Refund; the operator gets the traceback (log and ledger), the agent one line."""
        log.exception("validation %s failed in the grader", validation.id)
        self.ledger.log_event(validation.episode, "grader_failure", validation=validation.id,
                              traceback="".join(traceback.format_exception(err)))
        self.ledger.fail_infra(validation.id, f"infrastructure error in the grader "
                                              f"({type(err).__name__}); this validation was "
                                              f"refunded")

    @staticmethod
    def _initial_test_score(task_ref: str, model_hash: str, harness_hash: str) -> float | None:
        """The test score prepare measured, when the submission is the initial system itself:
        the gain is defined against that measurement, so the same bytes get the same number."""
        from vtbench.grader.intake import intake
        from vtbench.prepare import score_summary
        from vtbench.prepare.prepare import system_folder
        from vtbench.prepare.systems import is_complete, model_dir
        from vtbench.tasks import find_task

        task = find_task(task_ref)
        initial = model_dir(system_folder(task, "initial"), 0)
        if harness_hash != PRISTINE or not is_complete(initial):
            return None
        if intake(initial, "model").hash != model_hash:
            return None
        score: float | None = score_summary(task)["initial"]["test"]
        return score

    def _score_submission(self, episode_id: str, model_hash: str, harness_hash: str) -> None:
        episode = self.ledger.episode(episode_id)
        known = self._initial_test_score(episode.task, model_hash, harness_hash)
        if known is not None:
            self.ledger.set_submission_result(episode_id, "scored", {
                "score": known, "source": "the initial system, as scored by prepare"})
            return
        inputs = {"task": episode.task, "model_hash": model_hash, "harness_hash": harness_hash}
        try:
            result, _ = self._evaluate("test", inputs)
        except (CheckpointError, HarnessError) as err:
            self.ledger.set_submission_result(episode_id, "failed", {"score": 0.0,
                                              "error": err.one_line()})
            return
        except Exception as err:
            log.exception("scoring the submission of %s failed in the grader", episode_id)
            raise GraderUnavailable("scoring failed in the grader; finish again") from err
        self.ledger.set_submission_result(episode_id, "scored", result)
