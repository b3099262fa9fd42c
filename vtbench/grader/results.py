"""What the operator reads back: the ledger's status, an episode's test result (gain over
the initial system, normalised by the reference) and its history in the episode record's
shape. Operator only: these carry test scores, never shown to an episode.
"""

from typing import Any

from vtbench.grader.api import (
    EpisodeHistory,
    EpisodeSummary,
    OperatorStatus,
    SubmissionRecord,
    TestResult,
    ValidationRecord,
)
from vtbench.grader.ledger import Episode, Ledger
from vtbench.grader.lineage import LineageBook
from vtbench.grader.pipeline import prepared_for
from vtbench.grader.validations import view


def normalised(gain: float | None, spread: float | None) -> float | None:
    """Gain over (reference - initial); a gain of exactly 0 is 0 even where they tie."""
    if gain is None:
        return None
    if gain == 0:
        return 0.0
    return gain / spread if spread else None


def operator_status(ledger: Ledger) -> OperatorStatus:
    """Episodes, their remaining budgets, open validations and ledger consistency; needs only
    the ledger, so the operator's ``grader status`` reads it without a grader."""
    episodes = []
    for episode in ledger.episodes():
        left = ledger.remaining(episode.id)
        submission = ledger.submission(episode.id)
        episodes.append(EpisodeSummary(
            episode=episode.id, task=episode.task, status=episode.status,
            validations=left.validations, compute_seconds=left.compute_seconds,
            submission=submission.state if submission else None))
    queued = [v.id for v in ledger.validations() if v.state in ("queued", "running")]
    return OperatorStatus(episodes=episodes, open_validations=queued,
                          consistency=ledger.check_consistency())


def test_result(ledger: Ledger, episode_id: str) -> TestResult:
    episode = ledger.episode(episode_id)
    prepared = prepared_for(episode)
    initial, reference = prepared.initial_test, prepared.reference_test
    submission = ledger.submission(episode_id)
    result = (submission.result or {}) if submission else {}
    state = submission.state if submission else "no submission"
    final = result.get("score") if submission else initial
    gain = final - initial if final is not None and initial is not None else None
    spread = reference - initial if reference is not None and initial is not None else None
    return TestResult(
        episode=episode_id, task=prepared.id, state=state, test_score=final, initial=initial,
        reference=reference, gain=gain, normalised_gain=normalised(gain, spread),
        error=result.get("error"))


def history(ledger: Ledger, lineage: LineageBook, episode_id: str) -> EpisodeHistory:
    """Validations, submission and candidates, as the episode record keeps them."""
    episode = ledger.episode(episode_id)
    validations = []
    for index, v in enumerate(ledger.validations(episode_id), start=1):
        shown = view(v)
        validations.append(ValidationRecord(
            index=index, elapsed_seconds=round(v.created - episode.created, 1),
            snapshot=v.inputs.get("snapshot") or "", candidate=v.inputs["candidate"],
            model_hash=v.inputs["model_hash"], harness_hash=v.inputs["harness_hash"],
            score=shown.score if v.state == "completed" else None, error=shown.error,
            cached=shown.cached, charged=v.settlement == "charged" and v.credit > 0,
            compute_seconds=v.compute_seconds))
    return EpisodeHistory(validations=validations,
                          submission=_submission_record(ledger, episode),
                          candidates=lineage.candidates(episode_id))


def _submission_record(ledger: Ledger, episode: Episode) -> SubmissionRecord | None:
    submission = ledger.submission(episode.id)
    if submission is None:
        return None
    detail: dict[str, Any] = next((e["detail"] for e in reversed(ledger.events(episode.id))
                                   if e["kind"] == "submission_snapshot"), {})
    return SubmissionRecord(
        candidate=detail.get("candidate", ""), snapshot=detail.get("snapshot") or "",
        model_hash=submission.model_hash, harness_hash=submission.harness_hash,
        elapsed_seconds=round(submission.created - episode.created, 1))
