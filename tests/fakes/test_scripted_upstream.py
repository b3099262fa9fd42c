"""The scripted upstream advances like an agent loop and fails loudly past its script."""

import json
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
    "gemini": ("/v1beta/models/m:generateContent", {"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command",
                                                      "args": {"command": "ls"}}}]},
        {"role": "user", "parts": [{"functionResponse": {
            "name": "run_shell_command", "response": {"output": "a.txt"}}}]}]}),
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


def test_gemini_streams_as_sse_with_alt_sse_and_as_a_json_array_without(
    scripted_upstream: ScriptedUpstream,
) -> None:
    scripted_upstream.play(call("run_shell_command", {"command": "ls"}, text="Looking.",
                                input_tokens=5, output_tokens=3, thoughts_tokens=2))
    path = "/v1beta/models/gemini-x:streamGenerateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}]}
    with httpx.Client(base_url=scripted_upstream.base_url) as client:
        sse = client.post(path, params={"alt": "sse"}, json=body)
        array = client.post(path, json=body)
    assert sse.headers["content-type"].startswith("text/event-stream")
    chunks = [json.loads(block.removeprefix("data: "))
              for block in sse.text.split("\r\n\r\n") if block]
    def without_ids(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in chunk.items() if k != "responseId"} for chunk in found]

    assert len(chunks) == 3 and without_ids(chunks) == without_ids(array.json())
    assert chunks[-1]["modelVersion"] == "gemini-x"
    assert chunks[-1]["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}}]
    assert chunks[-1]["usageMetadata"]["thoughtsTokenCount"] == 2


def test_gemini_count_tokens_answers_without_using_the_script(
    scripted_upstream: ScriptedUpstream,
) -> None:
    with httpx.Client(base_url=scripted_upstream.base_url) as client:
        answer = client.post("/v1beta/models/m:countTokens", json={"contents": []})
    assert answer.json() == {"totalTokens": 42}
    assert scripted_upstream.requests[0].step is None
