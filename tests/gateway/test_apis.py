"""Each wire API through the gateway to the scripted upstream, streaming and not."""

import json
from typing import Any

import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, call, say
from tests.gateway.agent_calls import MODELS, send, sse_events
from tests.gateway.conftest import PRICES

APIS = ["anthropic", "chat", "responses", "gemini"]
USAGE = {"input_tokens": 120, "output_tokens": 33, "cache_read_tokens": 40,
         "cache_write_tokens": 5}


def expected_usage(api: str) -> dict[str, int]:
    # OpenAI and Gemini have no cache-write count; the scripted upstream reports none there.
    return USAGE if api == "anthropic" else {**USAGE, "cache_write_tokens": 0}


def expected_dollars(api: str) -> float:
    usage = expected_usage(api)
    price = PRICES[MODELS[api]]
    read = price.cache_read if price.cache_read is not None else price.input
    write = price.cache_write if price.cache_write is not None else price.input
    return (usage["input_tokens"] * price.input + usage["output_tokens"] * price.output
            + usage["cache_read_tokens"] * read + usage["cache_write_tokens"] * write) / 1e6


def tool_call_seen(api: str, stream: bool, body: Any) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) as the agent reads them from the answer."""
    if not stream:
        if api == "anthropic":
            block = body["content"][-1]
            return block["name"], block["input"]
        if api == "chat":
            function = body["choices"][0]["message"]["tool_calls"][0]["function"]
            return function["name"], json.loads(function["arguments"])
        if api == "gemini":
            call = body["candidates"][0]["content"]["parts"][-1]["functionCall"]
            return call["name"], call["args"]
        item = body["output"][-1]
        return item["name"], json.loads(item["arguments"])
    if api == "gemini":
        [call] = [part["functionCall"] for e in body for part in
                  e["candidates"][0]["content"]["parts"] if "functionCall" in part]
        return call["name"], call["args"]
    if api == "anthropic":
        name = next(e["content_block"]["name"] for e in body
                    if e["type"] == "content_block_start"
                    and e["content_block"]["type"] == "tool_use")
        parts = [e["delta"]["partial_json"] for e in body if e["type"] == "content_block_delta"
                 and e["delta"]["type"] == "input_json_delta"]
        return name, json.loads("".join(parts))
    if api == "chat":
        calls = [c for e in body if isinstance(e, dict) for ch in e["choices"]
                 for c in ch["delta"].get("tool_calls", [])]
        return calls[0]["function"]["name"], json.loads(
            "".join(c["function"]["arguments"] for c in calls))
    item = next(e["item"] for e in body if e["type"] == "response.output_item.done"
                and e["item"]["type"] == "function_call")
    return item["name"], json.loads(item["arguments"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_a_tool_call_reaches_the_agent_and_its_tokens_are_metered_exactly(
    api: str, stream: bool, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(call("Bash", {"command": "ls -la"}, text="Let me look.", **USAGE))
    gateway = start_gateway()

    response = send(gateway.client, api, stream)

    assert response.status_code == 200, response.text
    body = sse_events(response.text) if stream else response.json()
    assert tool_call_seen(api, stream, body) == ("Bash", {"command": "ls -la"})
    totals = gateway.totals()
    metered = {k: getattr(totals, k) for k in USAGE}
    assert metered == expected_usage(api)
    assert totals.dollars == pytest.approx(expected_dollars(api), rel=1e-9)
    [line] = gateway.trajectory()
    assert line.usage == expected_usage(api)
    assert line.stream is stream and line.state == "done" and line.usage_reported


@pytest.mark.parametrize("api", APIS)
def test_a_stream_is_rebuilt_into_one_answer_in_the_trajectory(
    api: str, scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(call("exec_command", {"cmd": "vtbench validate"}, text="Checking."))
    gateway = start_gateway()

    send(gateway.client, api, stream=True)

    [line] = gateway.trajectory()
    answer = line.response
    if api == "anthropic":
        assert [b["type"] for b in answer["content"]] == ["text", "tool_use"]
        assert answer["content"][0]["text"] == "Checking."
        assert answer["content"][1]["input"] == {"cmd": "vtbench validate"}
        assert answer["stop_reason"] == "tool_use"
    elif api == "chat":
        message = answer["choices"][0]["message"]
        assert message["content"] == "Checking."
        assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {
            "cmd": "vtbench validate"}
        assert answer["choices"][0]["finish_reason"] == "tool_calls"
    elif api == "gemini":
        [candidate] = answer["candidates"]
        assert candidate["content"]["parts"] == [
            {"text": "Checking."},
            {"functionCall": {"name": "exec_command", "args": {"cmd": "vtbench validate"}}}]
        assert candidate["finishReason"] == "STOP"
        assert answer["usageMetadata"]["candidatesTokenCount"] == 7
    else:
        assert [item["type"] for item in answer["output"]] == ["message", "function_call"]
        assert answer["status"] == "completed"
    assert line.events >= 3
    assert line.timings.first_event_ms is not None
    assert line.timings.first_event_ms <= line.timings.total_ms


def test_chat_streams_always_ask_for_usage_but_only_show_it_when_the_agent_asked(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    scripted_upstream.play(say("one", input_tokens=5, output_tokens=2),
                           say("two", input_tokens=6, output_tokens=3), pick="sequence")
    gateway = start_gateway()

    unasked = sse_events(send(gateway.client, "chat", stream=True).text)
    asked = sse_events(send(gateway.client, "chat", stream=True,
                            stream_options={"include_usage": True}).text)

    for recorded in scripted_upstream.requests:
        assert recorded.body["stream_options"] == {"include_usage": True}
    assert not any(isinstance(e, dict) and e.get("usage") for e in unasked)
    assert unasked[-1] == "[DONE]"
    assert asked[-2]["usage"]["completion_tokens"] == 3
    totals = gateway.totals()
    assert (totals.input_tokens, totals.output_tokens) == (11, 5)


def test_a_stream_is_relayed_event_by_event_not_buffered(
    scripted_upstream: ScriptedUpstream, start_gateway: Any
) -> None:
    from dataclasses import replace

    scripted_upstream.play(replace(say("slow answer"), pause=True))
    gateway = start_gateway()
    path = "/v1/messages"
    body = {"model": "claude-test", "max_tokens": 10, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}

    with gateway.client.stream("POST", path, json=body) as response:
        lines = response.iter_lines()
        first = next(lines)
        # The upstream is now holding the rest of its stream until the gate opens: the
        # first event can only be here if the gateway forwarded it before the end.
        assert first == "event: message_start"
        scripted_upstream.gate.set()
        rest = "\n".join(lines)
    assert "message_stop" in rest
    assert gateway.totals().output_tokens == 7


def test_head_on_the_root_answers_for_cli_probes(start_gateway: Any) -> None:
    gateway = start_gateway()
    assert gateway.client.head("/").status_code == 200
