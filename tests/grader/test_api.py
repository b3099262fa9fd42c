"""The wire contract: one set of models for the app, the client and the episode record."""

from pathlib import Path

from tests.grader.conftest import GraderProcess, mark_prepared
from vtbench.client import GraderClient
from vtbench.episode.record import EpisodeRecord
from vtbench.grader import api
from vtbench.grader.app import create_app
from vtbench.grader.core import Grader
from vtbench.grader.ledger import Ledger
from vtbench.spec import AgentChoice, EpisodeSpec
from vtbench.tasks import find_task

ROUTE_MODELS = {"CandidateRequest", "ValidateRequest", "CreateEpisodeRequest", "MergeRequest",
                "EpisodeGrant", "ValidationView", "EpisodeStatus", "SubmissionAck",
                "MergeResult", "CandidateView", "TestResult", "EpisodeHistory",
                "OperatorStatus"}


def test_the_openapi_document_names_every_body_and_answer_of_the_contract(
        tmp_path: Path) -> None:
    app = create_app(Grader(ledger=Ledger(tmp_path / "ledger.sqlite")))
    schemas = app.openapi()["components"]["schemas"]
    assert set(schemas) >= ROUTE_MODELS
    assert all(getattr(api, name).__module__ == "vtbench.grader.api" for name in ROUTE_MODELS)
    history = schemas["EpisodeHistory"]["properties"]
    assert set(history) == {"validations", "submission", "candidates"}


def test_the_record_keeps_the_history_in_the_models_the_grader_answers_with() -> None:
    fields = EpisodeRecord.model_fields
    assert fields["validations"].annotation == list[api.ValidationRecord]
    assert fields["candidates"].annotation == list[api.LineageRecord]
    assert fields["submission"].annotation == api.SubmissionRecord | None


def test_the_client_returns_typed_answers_from_a_real_grader(
        grader: GraderProcess, small_task: Path, workspace: Path) -> None:
    grader.start()
    task, digest = mark_prepared(small_task)
    operator = GraderClient(grader.socket, grader.operator)
    spec = EpisodeSpec.decide(task, digest, find_task(str(small_task)).spec,
                              AgentChoice(name="noop"), seed=0, budget_minutes=7)
    grant = operator.create_episode(spec, workspace)
    assert isinstance(grant, api.EpisodeGrant)
    (kept,) = [e for e in Ledger().events() if e["kind"] == "episode_spec"]
    assert EpisodeSpec.model_validate(kept["detail"]["spec"]) == spec
    agent = GraderClient(grader.socket, grant.token)
    status = agent.status()
    assert (status.task, status.submitted, status.submission) == ("dsl", False, None)
    ack = agent.submit("models/good")
    assert isinstance(ack, api.SubmissionAck) and ack.received
    assert agent.status().submission == api.SubmittedHashes(
        model_hash=ack.model_hash, harness_hash=ack.harness_hash)
    history = operator.history(grant.episode)
    assert history.submission is not None and history.submission.candidate == "models/good"
    assert [c.name for c in history.candidates] == ["models/good"]
