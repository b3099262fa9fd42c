"""The real key goes upstream, the agent's never does; spent budgets refuse before upstream.

Concurrency and reservations: ``test_concurrent_budgets.py``.
"""

from typing import Any

import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, say
from tests.gateway.agent_calls import AGENT_KEY, send
from tests.gateway.conftest import REAL_ANTHROPIC_KEY, REAL_GEMINI_KEY, REAL_OPENAI_KEY
from vtbench.gateway import BUDGET_MESSAGE, Budget

APIS = ["anthropic", "chat", "responses", "gemini"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_the_real_key_replaces_the_agents_key_upstream(
    api: str, stream: bool, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi"))
    gateway = start_gateway()

    assert send(gateway.client, api, stream).status_code == 200

    [recorded] = scripted_upstream.requests
    assert AGENT_KEY not in repr(recorded.headers)
    if api == "anthropic":
        assert recorded.headers["x-api-key"] == REAL_ANTHROPIC_KEY
        assert "authorization" not in recorded.headers
        assert recorded.query == "beta=true"
        assert recorded.headers["anthropic-version"] == "2023-06-01"
    elif api == "gemini":
        assert recorded.headers["x-goog-api-key"] == REAL_GEMINI_KEY
        assert not {"authorization", "x-api-key"} & set(recorded.headers)
        assert recorded.query == ("alt=sse" if stream else "")
    else:
        assert recorded.headers["authorization"] == f"Bearer {REAL_OPENAI_KEY}"
        assert "x-api-key" not in recorded.headers


def test_credential_headers_of_any_name_are_dropped(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi"))
    gateway = start_gateway()
    body = {"model": "gpt-test", "input": "hi"}
    sneaky = {"api-key": "x1", "cookie": "x2", "openai-organization": "x3",
              "x-goog-api-key": "x4", "proxy-authorization": "x5", "x-keep-me": "yes"}

    gateway.client.post("/v1/responses", json=body, headers=sneaky)

    headers = scripted_upstream.requests[0].headers
    assert not {"api-key", "cookie", "openai-organization", "x-goog-api-key",
                "proxy-authorization"} & set(headers)
    assert headers["x-keep-me"] == "yes"


def test_the_real_key_never_appears_in_the_trajectory(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi"))
    gateway = start_gateway()
    send(gateway.client, "anthropic", stream=True)
    send(gateway.client, "gemini", stream=True)
    text = gateway.episode.trajectory_path().read_text()
    for key in (REAL_ANTHROPIC_KEY, REAL_OPENAI_KEY, REAL_GEMINI_KEY):
        assert key not in text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_a_spent_token_budget_refuses_in_the_providers_error_shape_without_upstream(
    api: str, stream: bool, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    # more input than the request's bytes: what a provider adds on its side, charged as reported
    scripted_upstream.play(say("spend it all", input_tokens=1800, output_tokens=200))
    gateway = start_gateway(budget=Budget(max_tokens=2000))
    assert send(gateway.client, api, stream).status_code == 200

    refused = send(gateway.client, api, stream)

    assert len(scripted_upstream.requests) == 1, "the refused request reached the upstream"
    body = refused.json()
    assert refused.status_code == 400
    if api == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        message = body["error"]["message"]
    elif api == "gemini":
        assert body["error"]["code"] == 400
        assert body["error"]["status"] == "FAILED_PRECONDITION"
        message = body["error"]["message"]
    else:
        assert body["error"]["type"] == "insufficient_quota"
        assert body["error"]["code"] == "insufficient_quota"
        message = body["error"]["message"]
    assert message.startswith(BUDGET_MESSAGE)
    assert "2000 of 2000 tokens" in message
    totals = gateway.totals()
    assert (totals.tokens, totals.refused, totals.exchanges) == (2000, 1, 2)
    assert [line.state for line in gateway.trajectory()] == ["done", "refused"]


def test_a_spent_dollar_budget_refuses_the_next_request(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    # claude-test: 3 USD / M input, 15 USD / M output -> 0.006 + 0.0015 = 0.0075 USD
    scripted_upstream.play(say("pricey", input_tokens=2000, output_tokens=100), pick="sequence")
    gateway = start_gateway(budget=Budget(max_dollars=0.01))

    first = send(gateway.client, "anthropic", stream=False)
    second = send(gateway.client, "anthropic", stream=False)

    assert first.status_code == 200
    assert second.status_code == 400
    assert "$0.0075 of $0.0100" in second.json()["error"]["message"]
    assert gateway.totals().dollars == pytest.approx(0.0075)


def test_a_zero_budget_refuses_the_first_request(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    gateway = start_gateway(budget=Budget(max_tokens=0))
    assert send(gateway.client, "responses", stream=True).status_code == 400
    assert scripted_upstream.requests == []


def test_an_unknown_model_is_priced_at_the_default_price(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi", input_tokens=1000, output_tokens=500))
    gateway = start_gateway()
    send(gateway.client, "chat", stream=False, model="mystery-model")
    # default price of the test config: 10 USD / M input, 20 USD / M output
    assert gateway.totals().dollars == pytest.approx(0.01 + 0.01)


def test_a_model_is_priced_by_its_longest_listed_prefix(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi", input_tokens=1_000_000, output_tokens=0))
    gateway = start_gateway()
    send(gateway.client, "anthropic", stream=False, model="claude-test-20990101")
    assert gateway.totals().dollars == pytest.approx(3.0)


def test_budgets_are_per_episode(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi", input_tokens=1500, output_tokens=1500))
    spent = start_gateway("ep-a", budget=Budget(max_tokens=3000))
    fresh = start_gateway("ep-b", budget=Budget(max_tokens=3000))

    assert send(spent.client, "chat", stream=False).status_code == 200
    assert send(spent.client, "chat", stream=False).status_code == 400
    assert send(fresh.client, "chat", stream=False).status_code == 200
    assert spent.episode.usage_db == fresh.episode.usage_db
    assert (spent.totals().tokens, fresh.totals().tokens) == (3000, 3000)
