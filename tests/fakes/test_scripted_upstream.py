"""The scripted upstream advances like an agent loop and fails loudly past its script."""

from typing import Any

import httpx
import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, call, say

# One request per API carrying one tool result, as each agent CLI sends it back.
WITH_ONE_RESULT: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic": ("/v1/messages", {"model": "m", "max_tokens": 5, "messages": [
        {"role": "system", "content": "not a turn"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                           "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "a.txt"}]}]}),
    "chat": ("/v1/chat/completions", {"model": "m", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "Bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}]}),
    "responses": ("/v1/responses", {"model": "m", "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}]}),
}


@pytest.mark.parametrize("api", list(WITH_ONE_RESULT))
def test_the_next_step_is_the_number_of_tool_results_sent_back(
    api: str, scripted_upstream: ScriptedUpstream
) -> None:
    scripted_upstream.play(call("Bash", {"command": "ls"}), say("second step"))
    path, body = WITH_ONE_RESULT[api]
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(scripted_upstream.socket_path)),
                      base_url="http://up") as client:
        answer = client.post(path, json=body).json()
    assert "second step" in str(answer)
    assert scripted_upstream.requests[0].step == 1


def test_a_request_past_the_script_is_a_500_and_a_recorded_error() -> None:
    with ScriptedUpstream([say("only one")], pick="sequence") as upstream:
        with httpx.Client(base_url=upstream.base_url) as client:
            body = {"model": "m", "input": "hi"}
            assert client.post("/v1/responses", json=body).status_code == 200
            second = client.post("/v1/responses", json=body)
        assert second.status_code == 500
        assert "script exhausted" in second.json()["error"]["message"]
        assert len(upstream.errors) == 1


def test_an_unscripted_route_is_recorded_as_an_error(scripted_upstream: ScriptedUpstream) -> None:
    with httpx.Client(base_url=scripted_upstream.base_url) as client:
        assert client.post("/v1/embeddings", json={"input": "x"}).status_code == 404
    assert scripted_upstream.take_errors() == ["unscripted request POST /v1/embeddings"]
