"""Work the gateway cannot meter when its exchange ends is refused, and what it forwards settles.

The gateway bills an exchange by the usage its answer reports. Background responses, batches,
file uploads and polls answer before (or without) the work they start, so they are refused at
the door in the provider's own error shape; every route it does forward settles with a usage.
"""

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.scripted_upstream import ScriptedUpstream, say
from tests.gateway.agent_calls import AGENT_KEY, send
from tests.gateway.conftest import gateway_config
from vtbench.gateway import BUDGET_MESSAGE, Budget
from vtbench.gateway.dialects import DIALECTS


class QueuingUpstream(ScriptedUpstream):
    """Answers every Responses request as OpenAI answers one sent with ``background``: at once,
    ``queued``, without usage; the work, and its bill, come later."""

    def app(self) -> Starlette:
        app = super().app()
        app.router.routes.insert(0, Route("/v1/responses", self._queued, methods=["POST"]))
        return app

    async def _queued(self, request: Request) -> Response:
        body = await request.json()
        self._record(request, body, "responses", None)
        return JSONResponse({"id": "resp_queued", "object": "response", "status": "queued",
                             "created_at": int(time.time()), "background": True,
                             "model": body.get("model"), "output": [], "usage": None})


@pytest.fixture
def queuing_upstream() -> Any:
    with QueuingUpstream() as upstream:
        yield upstream


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_background_responses_are_refused_before_the_provider_sees_them(
    stream: bool, queuing_upstream: QueuingUpstream, start_gateway: Any
) -> None:
    config = gateway_config(queuing_upstream)
    gateway = start_gateway(budget=Budget(max_tokens=20_000), config=config)

    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(
            lambda _: send(gateway.client, "responses", stream, background=True,
                           max_output_tokens=4000), range(30)))

    for response in responses:
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert "background" in error["message"] and "metered" in error["message"]
    assert queuing_upstream.requests == []
    totals = gateway.totals()
    assert (totals.refused, totals.tokens) == (30, 0)


def test_an_answer_that_reports_no_usage_is_charged_its_reservation(
    queuing_upstream: QueuingUpstream, start_gateway: Any
) -> None:
    config = gateway_config(queuing_upstream)
    gateway = start_gateway(budget=Budget(max_tokens=20_000), config=config)

    queued = send(gateway.client, "responses", False, max_output_tokens=4000)

    assert queued.status_code == 200 and queued.json()["usage"] is None
    [line] = gateway.trajectory()
    assert not line.usage_reported
    sent = len(json.dumps(line.request, separators=(",", ":")))  # as httpx sent it
    charged = sent + config.input_allowance_tokens + 4000
    assert gateway.totals().tokens == charged
    over = send(gateway.client, "responses", False, max_output_tokens=20_000 - charged)
    assert over.status_code == 400 and BUDGET_MESSAGE in over.text


FORWARDED = {"anthropic-messages": ("anthropic", [False, True]),
             "openai-chat": ("chat", [False, True]),
             "openai-responses": ("responses", [False, True]),
             "gemini-generate": ("gemini", [False]), "gemini-stream": ("gemini", [True])}
"""Every metered route the gateway forwards: the agent's API and its ways of streaming."""


def test_the_table_of_forwarded_routes_names_every_metered_route() -> None:
    assert set(FORWARDED) == {dialect.name for dialect in DIALECTS if dialect.metered}


@pytest.mark.parametrize(("dialect", "stream"), [
    (name, stream) for name, (_, streams) in FORWARDED.items() for stream in streams])
def test_every_forwarded_route_settles_with_the_usage_the_provider_reported(
    dialect: str, stream: bool, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi", input_tokens=40, output_tokens=9))
    gateway = start_gateway(budget=Budget(max_tokens=100_000))

    assert send(gateway.client, FORWARDED[dialect][0], stream).status_code == 200

    [line] = gateway.trajectory()
    assert (line.api, line.state, line.usage_reported) == (dialect, "done", True)
    assert gateway.totals().tokens == 49


OPENAI = {"authorization": f"Bearer {AGENT_KEY}"}
ANTHROPIC = {"x-api-key": AGENT_KEY, "anthropic-version": "2023-06-01"}
GEMINI = {"x-goog-api-key": AGENT_KEY}


@pytest.mark.parametrize(("method", "path", "headers"), [
    ("POST", "/v1/batches", OPENAI),
    ("POST", "/v1/files", OPENAI),
    ("GET", "/v1/responses/resp_queued", OPENAI),
    ("POST", "/v1/responses/resp_queued/cancel", OPENAI),
    ("POST", "/v1/completions", OPENAI),
    ("POST", "/v1/messages/batches", ANTHROPIC),
    ("GET", "/v1/messages/batches/msgbatch_1/results", ANTHROPIC),
    ("POST", "/v1/files", ANTHROPIC),
    ("POST", "/v1beta/models/gemini-test:batchGenerateContent", GEMINI),
    ("POST", "/upload/v1beta/files", GEMINI),
])
def test_routes_off_the_allow_list_are_refused_in_the_providers_shape_saying_why(
    method: str, path: str, headers: dict[str, str], scripted_upstream: ScriptedUpstream,
    start_gateway: Any
) -> None:
    gateway = start_gateway(budget=Budget(max_tokens=100_000))
    body = {"model": "gpt-test", "prompt": "hi", "best_of": 20, "input_file_id": "file-1"}

    response = gateway.client.request(method, path, headers=headers, json=body)

    assert response.status_code == 404
    answer = response.json()
    if headers is ANTHROPIC:
        assert answer["type"] == "error" and answer["error"]["type"] == "not_found_error"
    elif headers is GEMINI:
        assert answer["error"]["status"] == "NOT_FOUND"
    else:
        assert answer["error"]["type"] == "invalid_request_error"
    message = answer["error"]["message"]
    assert f"does not serve {method} {path}" in message and "metered" in message
    assert scripted_upstream.requests == []



@pytest.mark.slow  # two episodes' gateways on one usage ledger, thirty refusals among them
def test_background_work_refused_in_one_episode_leaves_another_on_the_same_ledger_metered(
    queuing_upstream: QueuingUpstream, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    """A gateway serves one episode; episodes share the usage ledger. One episode's
    background responses are refused while another's ordinary responses, sent at the same
    time, settle with the usage their provider reported and nothing of the first."""
    attacked = start_gateway("ep-attacked", budget=Budget(max_tokens=20_000),
                             config=gateway_config(queuing_upstream))
    scripted_upstream.play(say("hi", input_tokens=40, output_tokens=9))
    honest = start_gateway("ep-honest", budget=Budget(max_tokens=20_000))
    assert honest.episode.usage_db == attacked.episode.usage_db

    def background(index: int) -> Any:
        return send(attacked.client, "responses", bool(index % 2), background=True,
                    max_output_tokens=4000)

    with ThreadPoolExecutor(10) as pool:
        refusals = pool.map(background, range(30))
        answers = pool.map(lambda stream: send(honest.client, "responses", stream,
                                               max_output_tokens=1000), [False, True] * 2)
        refused, answered = list(refusals), list(answers)
    assert all(r.status_code == 400 and "metered" in r.text for r in refused)
    assert queuing_upstream.requests == []
    assert (attacked.totals().refused, attacked.totals().tokens) == (30, 0)
    assert all(a.status_code == 200 for a in answered), [a.text for a in answered]
    totals = honest.totals()
    assert (totals.tokens, totals.exchanges, totals.refused) == (4 * 49, 4, 0)
    assert totals.unsettled_tokens == 0
    lines = honest.trajectory()
    assert len(lines) == 4 and all(line.usage_reported for line in lines)
