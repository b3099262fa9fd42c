"""A request for several answers at once reserves its output limit once per answer.

Chat Completions ``n`` and Gemini's ``generationConfig.candidateCount`` make the provider
generate, and bill, that many answers, each up to the output limit; the other wire APIs the
gateway serves (Messages, Responses) have no such field.
"""

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, say
from tests.gateway.agent_calls import request_for, send
from tests.gateway.conftest import gateway_config
from vtbench.gateway import BUDGET_MESSAGE, Budget

ATTACKERS = 8
ANSWERS = 64
LIMIT = 250


def many_answers(api: str, answers: int, limit: int | None) -> dict[str, Any]:
    """The fields asking for ``answers`` answers of at most ``limit`` tokens each."""
    if api == "chat":
        return {"n": answers, **({"max_tokens": limit} if limit is not None else {})}
    config: dict[str, Any] = {"candidateCount": answers}
    if limit is not None:
        config["maxOutputTokens"] = limit
    return {"generationConfig": config}


def send_together(gateway: Any, upstream: ScriptedUpstream, api: str) -> list[httpx.Response]:
    """ATTACKERS streams at once; the upstream holds each open until every one has been
    forwarded or refused, so all forwarded requests are in flight together."""
    with ThreadPoolExecutor(ATTACKERS) as pool:
        futures = [pool.submit(send, gateway.client, api, True,
                               **many_answers(api, ANSWERS, LIMIT)) for _ in range(ATTACKERS)]
        deadline = time.monotonic() + 20
        while (len(upstream.requests) + sum(f.done() for f in futures) < ATTACKERS
               and time.monotonic() < deadline):
            time.sleep(0.02)
        upstream.gate.set()
        return [future.result() for future in futures]


@pytest.mark.parametrize("api", ["chat", "gemini"])
def test_concurrent_requests_for_many_answers_never_spend_past_the_token_budget(
    api: str, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    # The provider bills every answer: 64 answers of 250 tokens are 16,000 output tokens.
    scripted_upstream.play(say("answers", input_tokens=30, output_tokens=ANSWERS * LIMIT,
                               pause=True))
    gateway = start_gateway(budget=Budget(max_tokens=20_000))

    responses = send_together(gateway, scripted_upstream, api)

    forwarded = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 400 and BUDGET_MESSAGE in r.text]
    assert len(forwarded) + len(refused) == ATTACKERS
    assert len(forwarded) == len(scripted_upstream.requests) == 1
    assert f"{ANSWERS} answers of {LIMIT}" in refused[0].text
    totals = gateway.totals()
    assert totals.tokens == len(forwarded) * (30 + ANSWERS * LIMIT) <= 20_000


@pytest.mark.parametrize("api", ["chat", "gemini"])
def test_an_output_limit_written_for_many_answers_is_shared_among_them(
    api: str, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi"))
    gateway = start_gateway(budget=Budget(max_tokens=3000))

    assert send(gateway.client, api, False, **many_answers(api, 4, None)).status_code == 200

    [recorded] = scripted_upstream.requests
    _, _, body = request_for(api, False, **many_answers(api, 4, None))
    sent = len(json.dumps(body, separators=(",", ":")))
    written = (recorded.body["generationConfig"]["maxOutputTokens"] if api == "gemini"
               else recorded.body["max_completion_tokens"])
    allowance = gateway_config(scripted_upstream).input_allowance_tokens
    assert written == (3000 - sent - allowance) // 4


@pytest.mark.parametrize(("api", "value"), [("chat", 0), ("chat", "64"), ("chat", True),
                                            ("gemini", -1), ("gemini", 2.5)])
def test_a_count_of_answers_that_is_not_a_count_is_refused_naming_it(
    api: str, value: Any, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    gateway = start_gateway(budget=Budget(max_tokens=100_000))

    refused = send(gateway.client, api, False, **many_answers(api, value, 10))

    assert refused.status_code == 400
    name = "n" if api == "chat" else "generationConfig.candidateCount"
    assert refused.json()["error"]["message"].startswith(f"{name} must be a count of answers")
    assert scripted_upstream.requests == []


@pytest.mark.slow  # two episodes' gateways on one usage ledger, eight streams held open
def test_many_answers_in_one_episode_leave_another_metered_on_the_same_ledger_untouched(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    """A gateway serves one episode; episodes share the usage ledger. While one episode's
    requests for many answers are in flight, another's ordinary request is answered and
    metered as its own, and nothing of the first reaches its totals or its trajectory."""
    scripted_upstream.play(say("answers", input_tokens=30, output_tokens=ANSWERS * LIMIT,
                               pause=True))
    attacked = start_gateway("ep-attacked", budget=Budget(max_tokens=20_000))
    with ScriptedUpstream() as other:
        other.play(say("hello", input_tokens=12, output_tokens=5))
        honest = start_gateway("ep-honest", budget=Budget(max_tokens=20_000),
                               config=gateway_config(other))
        assert honest.episode.usage_db == attacked.episode.usage_db
        with ThreadPoolExecutor(1) as pool:
            attack = pool.submit(send_together, attacked, scripted_upstream, "chat")
            deadline = time.monotonic() + 20
            while not scripted_upstream.requests and time.monotonic() < deadline:
                time.sleep(0.02)
            answer = send(honest.client, "chat", False, max_tokens=LIMIT)
            responses = attack.result()
    assert answer.status_code == 200, answer.text
    assert sum(r.status_code == 200 for r in responses) == 1
    assert attacked.totals().tokens == 30 + ANSWERS * LIMIT <= 20_000
    totals = honest.totals()
    assert (totals.input_tokens, totals.output_tokens, totals.exchanges) == (12, 5, 1)
    assert (totals.refused, totals.interrupted, totals.unsettled_tokens) == (0, 0, 0)
    assert len(honest.trajectory()) == 1
