"""Budgets hold under concurrency: each request reserves its worst case before it leaves."""

import json
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, say
from tests.gateway.agent_calls import send
from tests.gateway.conftest import gateway_config
from vtbench.gateway import BUDGET_MESSAGE, Budget, UsageStore

APIS = ["anthropic", "chat", "responses", "gemini"]
PARALLEL = 20
LIMIT = 400
"""The output limit every parallel request names; the scripted answers use all of it."""


def limit_fields(api: str, limit: int) -> dict[str, Any]:
    """The request fields that name an output limit, in each wire API's own spelling."""
    fields: dict[str, dict[str, Any]] = {
        "anthropic": {"max_tokens": limit}, "chat": {"max_completion_tokens": limit},
        "responses": {"max_output_tokens": limit},
        "gemini": {"generationConfig": {"maxOutputTokens": limit}}}
    return fields[api]


def send_at_once(gateway: Any, upstream: ScriptedUpstream, api: str) -> list[httpx.Response]:
    """PARALLEL streams at once; the upstream holds each open until all have been answered
    or refused, so every forwarded request is in flight together."""
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = [pool.submit(send, gateway.client, api, True, **limit_fields(api, LIMIT))
                   for _ in range(PARALLEL)]
        deadline = time.monotonic() + 20
        while (len(upstream.requests) + sum(f.done() for f in futures) < PARALLEL
               and time.monotonic() < deadline):
            time.sleep(0.02)
        upstream.gate.set()
        return [future.result() for future in futures]


def refused_for_budget(response: httpx.Response) -> bool:
    return response.status_code == 400 and BUDGET_MESSAGE in response.text


@pytest.mark.parametrize("api", APIS)
def test_parallel_requests_never_spend_more_than_the_token_budget(
    api: str, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("long answer", input_tokens=100, output_tokens=LIMIT, pause=True))
    gateway = start_gateway(budget=Budget(max_tokens=5000))

    responses = send_at_once(gateway, scripted_upstream, api)

    forwarded = [r for r in responses if r.status_code == 200]
    assert len(forwarded) + sum(map(refused_for_budget, responses)) == PARALLEL
    assert len(forwarded) == len(scripted_upstream.requests) >= 2
    totals = gateway.totals()
    assert totals.tokens == len(forwarded) * (100 + LIMIT) <= 5000
    assert totals.refused == PARALLEL - len(forwarded)


@pytest.mark.parametrize("api", ["anthropic", "chat"])
def test_parallel_requests_never_spend_more_than_the_dollar_budget(
    api: str, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("long answer", input_tokens=20, cache_read_tokens=80,
                               output_tokens=LIMIT, pause=True))
    gateway = start_gateway(budget=Budget(max_dollars=0.035))

    responses = send_at_once(gateway, scripted_upstream, api)

    forwarded = [r for r in responses if r.status_code == 200]
    assert len(forwarded) + sum(map(refused_for_budget, responses)) == PARALLEL
    assert len(forwarded) >= 2
    # cached tokens are charged as the provider reports them, at the cache-read price
    price = {"anthropic": (3.0, 0.3, 15.0), "chat": (1.25, 0.125, 10.0)}[api]
    each = (20 * price[0] + 80 * price[1] + LIMIT * price[2]) / 1e6
    totals = gateway.totals()
    assert totals.cache_read_tokens == 80 * len(forwarded)
    assert totals.dollars == pytest.approx(len(forwarded) * each)
    assert totals.dollars <= 0.035


@pytest.mark.parametrize("api", ["chat", "responses", "gemini"])  # Messages always names one
def test_a_request_without_an_output_limit_carries_the_gateways_limit_upstream(
    api: str, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi"))
    config = gateway_config(scripted_upstream).model_copy(update={"default_output_limit": 700})
    gateway = start_gateway(budget=Budget(max_tokens=100_000), config=config)

    assert send(gateway.client, api, False).status_code == 200

    [recorded] = scripted_upstream.requests
    assert _named_limit(api, recorded.body) == 700


def test_the_written_limit_shrinks_to_what_the_budget_leaves(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi"))
    gateway = start_gateway(budget=Budget(max_tokens=3000))

    assert send(gateway.client, "responses", False).status_code == 200

    [recorded] = scripted_upstream.requests
    sent = len(json.dumps({"model": "gpt-test", "stream": False, "input": "list the files"},
                          separators=(",", ":")))
    allowance = gateway_config(scripted_upstream).input_allowance_tokens
    assert _named_limit("responses", recorded.body) == 3000 - sent - allowance


def test_without_a_budget_the_request_travels_unchanged(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi"))
    gateway = start_gateway()
    assert send(gateway.client, "responses", False).status_code == 200
    [recorded] = scripted_upstream.requests
    assert "max_output_tokens" not in recorded.body


def test_a_request_whose_named_limit_does_not_fit_is_refused_naming_it(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    gateway = start_gateway(budget=Budget(max_tokens=2000))

    refused = send(gateway.client, "anthropic", False, max_tokens=5000)

    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert message.startswith(BUDGET_MESSAGE)
    assert "5000 output tokens" in message and "0 of 2000 tokens used" in message
    assert scripted_upstream.requests == []


def test_an_output_limit_that_is_not_a_count_is_refused_under_a_budget(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    gateway = start_gateway(budget=Budget(max_tokens=100_000))
    refused = send(gateway.client, "chat", False, max_tokens="lots")
    assert refused.status_code == 400 and "max_tokens" in refused.json()["error"]["message"]
    assert scripted_upstream.requests == []


def test_an_exchange_a_crash_interrupted_stays_charged_its_reservation(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    first = start_gateway(budget=Budget(max_tokens=5000))
    first.server.stop()
    store = UsageStore(first.episode.usage_db)
    store.open("ep-1", "anthropic-messages", "claude-test", reserved_tokens=4500,
               reserved_dollars=0.0)  # in flight when its gateway died
    store.close()
    scripted_upstream.play(say("hi"))

    restarted = start_gateway(budget=Budget(max_tokens=5000))
    refused = send(restarted.client, "anthropic", False)

    assert refused_for_budget(refused)
    assert "4500 of 5000 tokens used" in refused.json()["error"]["message"]
    totals = restarted.totals()
    assert (totals.interrupted, totals.unsettled_tokens) == (1, 4500)


def _named_limit(api: str, body: dict[str, Any]) -> Any:
    if api == "gemini":
        return body["generationConfig"]["maxOutputTokens"]
    return body[{"anthropic": "max_tokens", "chat": "max_completion_tokens",
                 "responses": "max_output_tokens"}[api]]


def test_a_ledger_written_before_reservations_gains_their_columns(tmp_path: Path) -> None:
    old = sqlite3.connect(tmp_path / "usage.sqlite")
    old.executescript(
        "CREATE TABLE exchanges (id INTEGER PRIMARY KEY AUTOINCREMENT, episode TEXT NOT NULL,"
        " api TEXT NOT NULL, model TEXT, state TEXT NOT NULL, http_status INTEGER,"
        " input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,"
        " cache_read_tokens INTEGER NOT NULL DEFAULT 0,"
        " cache_write_tokens INTEGER NOT NULL DEFAULT 0, dollars REAL NOT NULL DEFAULT 0,"
        " started_at REAL NOT NULL, finished_at REAL);"
        "INSERT INTO exchanges (episode, api, state, input_tokens, started_at)"
        " VALUES ('ep', 'openai-chat', 'done', 7, 0);")
    old.close()

    store = UsageStore(tmp_path / "usage.sqlite")
    store.open("ep", "openai-chat", None, reserved_tokens=5)
    store.recover("ep")

    totals = store.totals("ep")
    store.close()
    assert (totals.input_tokens, totals.unsettled_tokens, totals.exchanges) == (7, 5, 2)
