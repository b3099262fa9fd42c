"""Metering under concurrency, abandoned streams, upstream errors, and the trajectory log."""

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, fail, say
from tests.gateway.agent_calls import request_for, send
from tests.gateway.conftest import gateway_config
from vtbench.gateway import GatewayConfig


def test_concurrent_requests_are_metered_exactly(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("ok", input_tokens=13, output_tokens=17, cache_read_tokens=3))
    gateway = start_gateway()
    jobs = [(api, stream) for api in ("anthropic", "chat", "responses", "gemini")
            for stream in (False, True)] * 10

    with ThreadPoolExecutor(max_workers=16) as pool:
        statuses = list(pool.map(lambda job: send(gateway.client, *job).status_code, jobs))

    assert statuses == [200] * len(jobs)
    totals = gateway.totals()
    assert totals.exchanges == len(jobs)
    assert (totals.input_tokens, totals.output_tokens, totals.cache_read_tokens) == (
        13 * len(jobs), 17 * len(jobs), 3 * len(jobs))
    lines = gateway.trajectory()
    assert len(lines) == len(jobs)
    assert len({line.exchange for line in lines}) == len(jobs)


def wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_a_stream_the_agent_abandons_is_still_metered_in_full(
    api: str, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(replace(say("long answer", input_tokens=21, output_tokens=99),
                                   pause=True))
    gateway = start_gateway()
    path, headers, body = request_for(api, stream=True)

    with gateway.client.stream("POST", path, headers=headers, json=body) as response:
        next(response.iter_lines())
    # The agent has hung up; the upstream now finishes its answer (and its usage).
    scripted_upstream.gate.set()

    wait_for(lambda: gateway.episode.trajectory_path().exists()
             and gateway.episode.trajectory_path().read_text().strip())
    totals = gateway.totals()
    assert (totals.input_tokens, totals.output_tokens) == (21, 99)


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses", "gemini"])
def test_an_upstream_error_passes_through_and_is_logged(
    api: str, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(fail(529, "Overloaded"))
    gateway = start_gateway()

    response = send(gateway.client, api, stream=True)

    assert response.status_code == 529
    assert "Overloaded" in response.text
    [line] = gateway.trajectory()
    assert (line.state, line.http_status) == ("error", 529)
    assert line.error == "upstream answered HTTP 529"
    assert "Overloaded" in str(line.response)
    assert gateway.totals().tokens == 0


def test_an_exhausted_script_fails_loudly_through_the_gateway(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    gateway = start_gateway()
    response = send(gateway.client, "anthropic", stream=True)
    assert response.status_code == 500
    assert "script exhausted" in response.json()["error"]["message"]
    [error] = scripted_upstream.take_errors()
    assert "needs step 0 but the script has 0 replies" in error


def test_an_unreachable_upstream_is_a_502_in_the_providers_shape(
    scripted_upstream: ScriptedUpstream, start_gateway: Any, tmp_path: Any
) -> None:
    config = gateway_config(scripted_upstream)
    assert config.anthropic is not None
    dead = config.anthropic.model_copy(update={"uds": tmp_path / "nobody-listens.sock"})
    gateway = start_gateway(config=config.model_copy(update={"anthropic": dead}))

    response = send(gateway.client, "anthropic", stream=True)

    assert response.status_code == 502
    assert response.json()["error"]["type"] == "api_error"
    [line] = gateway.trajectory()
    assert line.state == "error" and line.error is not None
    assert line.error.startswith("upstream unreachable")


def test_a_provider_without_an_upstream_is_refused_in_its_shape(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    config = GatewayConfig(anthropic=gateway_config(scripted_upstream).anthropic)
    gateway = start_gateway(config=config)
    response = send(gateway.client, "responses", stream=False)
    assert response.status_code == 400
    assert "no openai upstream" in response.json()["error"]["message"]


def test_a_body_that_is_not_json_is_refused_without_upstream(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    gateway = start_gateway()
    response = gateway.client.post("/v1/messages", content=b"{not json")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert scripted_upstream.requests == []


def test_every_trajectory_line_holds_request_answer_usage_and_timings(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("first", input_tokens=3, output_tokens=4),
                           say("second", input_tokens=5, output_tokens=6), pick="sequence")
    gateway = start_gateway()
    send(gateway.client, "chat", stream=False)
    send(gateway.client, "responses", stream=True)

    first, second = gateway.trajectory()
    assert first.request["messages"][0]["content"] == "list the files"
    assert first.response["choices"][0]["message"]["content"] == "first"
    assert first.usage["input_tokens"] == 3 and first.usage["output_tokens"] == 4
    assert second.request["input"] == "list the files"
    assert second.response["output"][0]["content"][0]["text"] == "second"
    assert (second.api, second.path, second.model) == ("openai-responses", "/v1/responses",
                                                       "gpt-test")
    for line in (first, second):
        assert line.episode == "ep-1" and line.http_status == 200
        assert line.timings.upstream_headers_ms is not None
        assert 0 < line.timings.upstream_headers_ms <= line.timings.total_ms
        assert line.dollars > 0


def test_the_gateway_does_not_follow_proxy_variables(
    scripted_upstream: ScriptedUpstream, start_gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    config = gateway_config(scripted_upstream)
    assert config.openai is not None
    tcp = config.openai.model_copy(update={"uds": None,
                                           "base_url": f"{scripted_upstream.base_url}/v1"})
    scripted_upstream.play(say("direct"))
    gateway = start_gateway(config=config.model_copy(update={"openai": tcp}))
    assert send(gateway.client, "chat", stream=False).status_code == 200


def test_an_error_event_inside_a_stream_is_relayed_and_logged_as_an_error(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(replace(say("x", input_tokens=9), stream_error="Overloaded"))
    gateway = start_gateway()

    response = send(gateway.client, "anthropic", stream=True)

    assert response.status_code == 200
    assert "event: error" in response.text and "Overloaded" in response.text
    [line] = gateway.trajectory()
    assert line.state == "error"
    assert line.error == "upstream sent an error event in the stream"
    assert line.usage["input_tokens"] == 9
    assert gateway.totals().input_tokens == 9
