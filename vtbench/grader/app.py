"""The grader's HTTP face: a thin FastAPI app over :class:`vtbench.grader.core.Grader`.

Trusts the core; trusts no caller. Every route needs a bearer token: an episode token
(scoped to that episode) on ``/v1/...`` routes, the operator token on ``/v1/operator/...``.
Exceptions become status codes through :data:`ERROR_STATUS`, the one table. Denials are
vague to the caller ("not authorized", "not found") and detailed in the log and in the
ledger's events. Request bodies are strict models: a malformed body is a 422 whose one
line names the field (never echoing the input), and it changes nothing in the ledger.
The OpenAPI spec is served at ``/openapi.json``.

Episode routes: ``GET /v1/status``; ``POST /v1/validations`` and ``GET
/v1/validations/{id}``; ``POST /v1/submission``; ``GET /v1/models`` (the episode's
candidates: lineage as the grader recorded it, see :mod:`vtbench.grader.lineage`, with the
best validation score so far); ``POST /v1/merges`` (merge candidates into a new
``models/<name>`` folder, no validation credit; a bad request is 400 or 422, an unknown
parent 404, an existing or contested output folder 409). Operator routes live under
``/v1/operator/``, among them ``GET /v1/operator/episodes/{id}/history`` (validations,
submission and candidate lineage in the episode record's shape). Every body and answer is
a model of :mod:`vtbench.grader.api`.
"""

import logging
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from vtbench.errors import (
    AlreadySubmitted,
    BudgetExhausted,
    CandidateRefused,
    CheckpointError,
    EpisodeClosed,
    EpisodeNotFound,
    GraderUnavailable,
    LedgerStateError,
    MergeFailed,
    MergeOutputExists,
    MergeRefused,
    NotFound,
    NotPrepared,
    SnapshotRefused,
    SpecError,
    TaskNotFound,
    Unauthorized,
    UnknownCandidate,
    VtbenchError,
)
from vtbench.grader.api import (
    CandidateRequest,
    CandidateView,
    CreateEpisodeRequest,
    EpisodeGrant,
    EpisodeHistory,
    EpisodeStatus,
    MergeRequest,
    MergeResult,
    OperatorStatus,
    SubmissionAck,
    TestResult,
    ValidateRequest,
    ValidationView,
)
from vtbench.grader.core import Grader
from vtbench.grader.ledger import Episode
from vtbench.grader.tokens import token_hash

log = logging.getLogger("vtbench.grader")

ERROR_STATUS: dict[type[VtbenchError], tuple[int, str | None]] = {
    Unauthorized: (401, "not authorized"),
    NotFound: (404, "not found"),
    EpisodeNotFound: (404, "not found"),
    UnknownCandidate: (404, None),
    CandidateRefused: (422, None),
    SnapshotRefused: (422, None),
    CheckpointError: (422, None),
    MergeRefused: (400, None),
    MergeFailed: (422, None),
    MergeOutputExists: (409, None),
    AlreadySubmitted: (409, None),
    LedgerStateError: (409, None),
    NotPrepared: (409, None),
    BudgetExhausted: (429, None),
    EpisodeClosed: (409, None),
    TaskNotFound: (400, None),
    SpecError: (400, None),
    GraderUnavailable: (503, None),
}
"""Exception -> (status, public message; None shows the error's own one line)."""


def status_for(err: VtbenchError) -> tuple[int, str]:
    for kind in type(err).__mro__:
        if kind in ERROR_STATUS:
            status, public = ERROR_STATUS[kind]
            return status, public or err.one_line()
    return 500, "internal error"


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def create_app(grader: Grader) -> FastAPI:
    app = FastAPI(title="vtbench grader", version="1")

    @app.exception_handler(VtbenchError)
    async def on_error(request: Request, err: VtbenchError) -> JSONResponse:
        status, public = status_for(err)
        log.warning("%s %s -> %d: %s", request.method, request.url.path, status, err.one_line())
        return JSONResponse({"error": public}, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def on_bad_body(request: Request, err: RequestValidationError) -> JSONResponse:
        # One line naming the field, never echoing the input (an Infinity in the body
        # made the default answer unserialisable: a 500).
        first = err.errors()[0] if err.errors() else {}
        field = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        return JSONResponse({"error": f"bad request: {field or 'body'}: "
                                      f"{first.get('msg', 'invalid')}"}, status_code=422)

    def episode(request: Request) -> Episode:
        token = _bearer(request)
        try:
            return grader.authenticate(token)
        except Unauthorized:
            operator = token is not None and _is_operator(token)
            reason = "operator token on an episode route" if operator else "bad episode token"
            grader.record_denial(request.url.path, reason)
            raise

    def _is_operator(token: str) -> bool:
        try:
            grader.authorize_operator(token)
        except Unauthorized:
            return False
        return True

    def operator(request: Request) -> None:
        token = _bearer(request)
        try:
            grader.authorize_operator(token)
        except Unauthorized:
            found = grader.ledger.episode_for_token(token_hash(token)) if token else None
            reason = "episode token on an operator route" if found else "bad operator token"
            grader.record_denial(request.url.path, reason, found.id if found else None)
            raise

    _episode_routes(app, grader, episode)
    _operator_routes(app, grader, operator)
    return app


def _episode_routes(app: FastAPI, grader: Grader, episode: Any) -> None:
    Me = Annotated[Episode, Depends(episode)]

    @app.get("/v1/status")
    def status(me: Me) -> EpisodeStatus:
        return grader.status(me)

    @app.post("/v1/validations", responses={202: {"model": ValidationView}})
    def validate(body: ValidateRequest, me: Me) -> Any:
        result = grader.validate(me, body.model, body.harness, wait=body.wait)
        code = 202 if result.state in ("queued", "running") else 200
        return JSONResponse(result.model_dump(mode="json"), status_code=code)

    @app.get("/v1/validations/{validation_id}")
    def validation(validation_id: int, me: Me) -> ValidationView:
        return grader.validation(me, validation_id)

    @app.post("/v1/submission")
    def submit(body: CandidateRequest, me: Me) -> SubmissionAck:
        return grader.submit(me, body.model, body.harness)

    @app.get("/v1/models")
    def models(me: Me) -> list[CandidateView]:
        return grader.models(me)

    @app.post("/v1/merges")
    def merge(body: MergeRequest, me: Me) -> MergeResult:
        return grader.merge(me, body)


def _operator_routes(app: FastAPI, grader: Grader, operator: Any) -> None:
    guard = [Depends(operator)]

    @app.post("/v1/operator/episodes", dependencies=guard)
    def create_episode(body: CreateEpisodeRequest) -> EpisodeGrant:
        return grader.create_episode(body.task, body.digest, Path(body.workspace), body.budgets,
                                     body.spec)

    @app.get("/v1/operator/status", dependencies=guard)
    def operator_status() -> OperatorStatus:
        return grader.operator_status()

    @app.get("/v1/operator/ledger", dependencies=guard)
    def ledger() -> dict[str, Any]:
        return grader.ledger.export()

    @app.post("/v1/operator/episodes/{episode_id}/finish", dependencies=guard)
    def finish(episode_id: str) -> TestResult:
        return grader.finish_episode(episode_id)

    @app.get("/v1/operator/episodes/{episode_id}/history", dependencies=guard)
    def history(episode_id: str) -> EpisodeHistory:
        return grader.history(episode_id)

    @app.get("/v1/operator/episodes/{episode_id}/result", dependencies=guard)
    def result(episode_id: str) -> TestResult:
        return grader.test_result(episode_id)
