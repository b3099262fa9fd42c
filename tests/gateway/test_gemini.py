"""The Gemini API through the gateway: what only Gemini does (model in the path, streaming by
route, usage in every chunk, thinking tokens, ``key=`` queries, Google's error shape).

The shared behaviour (tool calls relayed, exact metering, the real key upstream, budget
refusals) is covered for Gemini with the other APIs in test_apis.py, test_keys_and_budgets.py
and test_metering.py.
"""

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, call, fail, say
from tests.gateway.agent_calls import AGENT_KEY, request_for, send, sse_events
from tests.gateway.conftest import REAL_GEMINI_KEY, gateway_config
from tests.gateway.test_metering import wait_for
from vtbench.gateway import GatewayConfig, load_config
from vtbench.gateway.proxy import upstream_url

STREAM = "/v1beta/models/gemini-test:streamGenerateContent"
CONTENTS = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def test_thinking_tokens_are_metered_and_priced_as_output(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("ok", input_tokens=1000, output_tokens=100,
                               cache_read_tokens=4000, thoughts_tokens=900))
    gateway = start_gateway()

    assert send(gateway.client, "gemini", stream=True).status_code == 200

    totals = gateway.totals()
    assert (totals.input_tokens, totals.cache_read_tokens, totals.output_tokens) == (
        1000, 4000, 1000)
    # gemini-test: 2 USD / M input, 0.2 USD / M cached, 12 USD / M output
    assert totals.dollars == pytest.approx((1000 * 2.0 + 4000 * 0.2 + 1000 * 12.0) / 1e6)


def test_only_the_last_usage_of_a_stream_counts_not_the_sum_of_its_chunks(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    # Three chunks (two text pieces, one function call), each carrying usageMetadata.
    scripted_upstream.play(call("run_shell_command", {"command": "ls"}, text="Looking now.",
                                input_tokens=500, output_tokens=40))
    gateway = start_gateway()

    events = sse_events(send(gateway.client, "gemini", stream=True).text)

    assert len(events) == 3 and all("usageMetadata" in event for event in events)
    totals = gateway.totals()
    assert (totals.input_tokens, totals.output_tokens, totals.exchanges) == (500, 40, 1)
    [line] = gateway.trajectory()
    assert (line.api, line.model, line.events) == ("gemini-stream", "gemini-test", 3)


def test_a_stream_without_alt_sse_is_one_json_array_metered_by_its_last_chunk(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(call("run_shell_command", {"command": "ls"}, text="Looking now.",
                                input_tokens=70, output_tokens=9))
    gateway = start_gateway()

    response = gateway.client.post(STREAM, json=CONTENTS)

    assert response.status_code == 200
    chunks = response.json()
    assert isinstance(chunks, list) and len(chunks) == 3
    totals = gateway.totals()
    assert (totals.input_tokens, totals.output_tokens) == (70, 9)
    [line] = gateway.trajectory()
    assert line.state == "done" and line.stream and line.usage_reported


def test_a_gemini_stream_the_agent_abandons_is_still_metered_in_full(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(replace(call("run_shell_command", {"command": "ls"},
                                        text="long answer", input_tokens=21, output_tokens=99),
                                   pause=True))
    gateway = start_gateway()
    path, headers, body = request_for("gemini", stream=True)

    with gateway.client.stream("POST", path, headers=headers, json=body) as response:
        next(response.iter_lines())
    scripted_upstream.gate.set()

    wait_for(lambda: gateway.episode.trajectory_path().exists()
             and gateway.episode.trajectory_path().read_text().strip())
    totals = gateway.totals()
    assert (totals.input_tokens, totals.output_tokens) == (21, 99)


def test_the_agents_key_in_the_query_never_goes_upstream(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("hi"))
    gateway = start_gateway()

    response = gateway.client.post(f"{STREAM}?alt=sse&key={AGENT_KEY}", json=CONTENTS)

    assert response.status_code == 200
    [recorded] = scripted_upstream.requests
    assert recorded.query == "alt=sse"
    assert recorded.headers["x-goog-api-key"] == REAL_GEMINI_KEY
    assert AGENT_KEY not in json.dumps([recorded.query, recorded.headers])


def test_count_tokens_is_forwarded_and_costs_nothing(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    gateway = start_gateway()

    response = gateway.client.post("/v1beta/models/gemini-test:countTokens", json=CONTENTS)

    assert response.json() == {"totalTokens": 42}
    [recorded] = scripted_upstream.requests
    assert recorded.headers["x-goog-api-key"] == REAL_GEMINI_KEY
    totals = gateway.totals()
    assert (totals.exchanges, totals.tokens, totals.dollars) == (1, 0, 0.0)
    assert gateway.trajectory()[0].api == "gemini-count-tokens"


def test_an_error_object_inside_a_stream_is_relayed_and_logged_as_an_error(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(replace(say("x", input_tokens=9), stream_error="Overloaded"))
    gateway = start_gateway()

    response = send(gateway.client, "gemini", stream=True)

    assert response.status_code == 200
    assert sse_events(response.text)[-1]["error"]["status"] == "UNAVAILABLE"
    [line] = gateway.trajectory()
    assert (line.state, line.error) == ("error", "upstream sent an error event in the stream")
    assert gateway.totals().input_tokens == 9


def test_a_google_rate_limit_passes_through_unmetered(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(fail(429, "Resource has been exhausted"))
    gateway = start_gateway()

    response = send(gateway.client, "gemini", stream=False)

    assert response.status_code == 429
    assert response.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert gateway.totals().tokens == 0


def google_error(response: Any, code: int, status: str) -> str:
    body = response.json()
    assert response.status_code == code and set(body) == {"error"}
    assert (body["error"]["code"], body["error"]["status"]) == (code, status)
    return str(body["error"]["message"])


@pytest.mark.parametrize(("path", "content"), [
    (STREAM, b"{not json"),
    (STREAM, b"[1, 2]"),
    ("/v1beta/models/..:generateContent", json.dumps(CONTENTS).encode()),
    ("/v1beta/models/-x:generateContent", json.dumps(CONTENTS).encode()),
], ids=["not-json", "not-an-object", "dot-dot-model", "dash-model"])
def test_bad_requests_are_google_400s_that_never_reach_the_upstream(
    path: str, content: bytes, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    gateway = start_gateway()

    response = gateway.client.post(path, content=content)

    google_error(response, 400, "INVALID_ARGUMENT")
    assert scripted_upstream.requests == []
    [line] = gateway.trajectory()
    assert line.state == "refused"


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/v1beta/models/gemini-test:embedContent"),
    ("GET", "/v1beta/models"),
    ("GET", "/v1beta/models/gemini-test:generateContent"),
    ("POST", "/v1beta/models/a/b:generateContent"),
])
def test_routes_the_gateway_does_not_serve_are_google_404s(
    method: str, path: str, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    gateway = start_gateway()

    response = gateway.client.request(method, path, json=CONTENTS)

    assert "does not serve" in google_error(response, 404, "NOT_FOUND")
    assert scripted_upstream.requests == []


def test_an_oversized_body_is_refused_in_googles_shape(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    config = gateway_config(scripted_upstream).model_copy(update={"max_request_bytes": 100})
    gateway = start_gateway(config=config)
    response = gateway.client.post(STREAM, json={"contents": "x" * 200})
    google_error(response, 413, "INVALID_ARGUMENT")
    assert scripted_upstream.requests == []


def test_without_a_gemini_upstream_requests_are_refused_in_googles_shape(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    config = GatewayConfig(openai=gateway_config(scripted_upstream).openai)
    gateway = start_gateway(config=config)

    response = send(gateway.client, "gemini", stream=True)

    assert "no gemini upstream" in google_error(response, 400, "FAILED_PRECONDITION")


def test_an_unreachable_gemini_upstream_is_a_502_in_googles_shape(
    scripted_upstream: ScriptedUpstream, start_gateway: Any, tmp_path: Path
) -> None:
    config = gateway_config(scripted_upstream)
    assert config.gemini is not None
    dead = config.gemini.model_copy(update={"uds": tmp_path / "nobody-listens.sock"})
    gateway = start_gateway(config=config.model_copy(update={"gemini": dead}))

    response = send(gateway.client, "gemini", stream=False)

    google_error(response, 502, "UNAVAILABLE")


def test_a_version_segment_in_both_base_url_and_path_counts_once() -> None:
    path = "/v1beta/models/m:generateContent"
    assert upstream_url("https://g.example/v1beta/", path, "") == "https://g.example" + path
    assert upstream_url("https://g.example", path, "alt=sse") == (
        f"https://g.example{path}?alt=sse")
    assert upstream_url("https://o.example/v1", "/v1/responses", "") == (
        "https://o.example/v1/responses")


def test_a_gemini_section_in_the_config_file_resolves_its_socket_beside_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text('[gemini]\nbase_url = "http://upstream"\nuds = "up.sock"\n'
                    'api_key_env = "GEMINI_API_KEY"\n')
    config = load_config(path)
    assert config.gemini is not None and config.gemini.uds == tmp_path / "up.sock"
    assert config.upstream("gemini") == config.gemini
