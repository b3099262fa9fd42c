"""The grader client: what ``vtbench status|validate|models|merge|submit`` use inside the
research sandbox (episode token) and what the runner uses (operator token).

Inside a sandbox the grader's unix socket and the episode token come from the environment
(``VTBENCH_GRADER_SOCKET``, ``VTBENCH_TOKEN``), and so does the moment the runner stops the
agent (``VTBENCH_DEADLINE``, unix seconds). A refusal arrives as one :class:`GraderError`
line carrying the grader's public message. Every answer is parsed into its model of the
wire contract (:mod:`vtbench.grader.api`), so a change on either side fails here, loudly.
"""

import os
import time
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from vtbench.errors import CandidateRefused, GraderError, GraderUnavailable, VtbenchError
from vtbench.grader.api import (
    CandidateView,
    EpisodeGrant,
    EpisodeHistory,
    EpisodeStatus,
    MergeResult,
    SubmissionAck,
    TestResult,
    ValidationView,
)
from vtbench.spec import EpisodeSpec

DEADLINE_ENV = "VTBENCH_DEADLINE"
Answer = TypeVar("Answer", bound=BaseModel)


class NotInEpisode(VtbenchError):
    exit_code = 2


def seconds_left() -> float | None:
    """Seconds until the runner stops this episode's agent; None outside an episode."""
    deadline = os.environ.get(DEADLINE_ENV)
    return max(0.0, float(deadline) - time.time()) if deadline else None


def episode_gpus() -> list[str]:
    """The GPUs this sandbox was given (``CUDA_VISIBLE_DEVICES``; none when unset or empty)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [index for index in visible.split(",") if index.strip()]


def refuse_non_utf8(body: dict[str, Any]) -> None:
    """A path whose file name is not UTF-8 (its bytes stand in the string as surrogates)
    is refused here in one line: the grader takes UTF-8 only, and JSON cannot carry it."""
    for value in body.values():
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode()
                except UnicodeEncodeError:
                    raise CandidateRefused(f"candidate refused: {text}: not valid UTF-8",
                                           hint="rename it with UTF-8 characters only") from None


class GraderClient:
    def __init__(self, socket: Path, token: str, timeout: float = 3600.0) -> None:
        self.socket, self.token, self.timeout = socket, token, timeout

    @classmethod
    def from_environment(cls) -> "GraderClient":
        socket, token = os.environ.get("VTBENCH_GRADER_SOCKET"), os.environ.get("VTBENCH_TOKEN")
        if not socket or not token:
            raise NotInEpisode("this command talks to the grader of an episode",
                               hint="run it inside an episode's sandbox (vtbench run)")
        return cls(Path(socket), token)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        refuse_non_utf8(body or {})
        transport = httpx.HTTPTransport(uds=str(self.socket))
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            with httpx.Client(transport=transport, base_url="http://grader",
                              timeout=self.timeout) as http:
                response = http.request(method, path, json=body, headers=headers)
        except httpx.TransportError as err:
            raise GraderUnavailable(f"cannot reach the grader at {self.socket}: {err}") from None
        try:
            payload = response.json()
        except ValueError:
            payload = {"error": response.text[:200]}
        if response.status_code >= 400:
            message = payload.get("error") if isinstance(payload, dict) else None
            raise GraderError(f"grader refused {method} {path}: {message or response.status_code}")
        return payload

    def _answer(self, model: type[Answer], method: str, path: str,
                body: dict[str, Any] | None = None) -> Answer:
        return model.model_validate(self.request(method, path, body))

    def status(self) -> EpisodeStatus:
        return self._answer(EpisodeStatus, "GET", "/v1/status")

    def validate(self, model: str, harness: str | None = None) -> ValidationView:
        return self._answer(ValidationView, "POST", "/v1/validations",
                            {"model": model, "harness": harness, "wait": True})

    def validation(self, validation_id: int) -> ValidationView:
        return self._answer(ValidationView, "GET", f"/v1/validations/{validation_id}")

    def models(self) -> list[CandidateView]:
        return TypeAdapter(list[CandidateView]).validate_python(
            self.request("GET", "/v1/models"))

    def merge(self, method: str, models: list[str], weights: list[float], out: str,
              **options: Any) -> MergeResult:
        body = {"method": method, "models": models, "weights": weights, "out": out, **options}
        return self._answer(MergeResult, "POST", "/v1/merges", body)

    def submit(self, model: str, harness: str | None = None) -> SubmissionAck:
        return self._answer(SubmissionAck, "POST", "/v1/submission",
                            {"model": model, "harness": harness})

    def create_episode(self, spec: EpisodeSpec, workspace: Path) -> EpisodeGrant:
        """Operator: register the episode ``spec`` decided (the grader keeps it)."""
        return self._answer(EpisodeGrant, "POST", "/v1/operator/episodes",
                            {"task": spec.task, "digest": spec.task_digest,
                             "workspace": str(workspace), "spec": spec.model_dump(mode="json")})

    def finish(self, episode: str) -> TestResult:
        return self._answer(TestResult, "POST", f"/v1/operator/episodes/{episode}/finish")

    def result(self, episode: str) -> TestResult:
        return self._answer(TestResult, "GET", f"/v1/operator/episodes/{episode}/result")

    def history(self, episode: str) -> EpisodeHistory:
        """Validations, submission and candidate lineage of one episode (operator)."""
        return self._answer(EpisodeHistory, "GET", f"/v1/operator/episodes/{episode}/history")
