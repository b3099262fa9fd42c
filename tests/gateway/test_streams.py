"""SSE cutting and usage reading, independent of how the bytes arrive."""

from tests.fakes import wire
from tests.fakes.wire import call, say
from vtbench.gateway.streams import (
    AnthropicStream,
    ChatStream,
    EventSplitter,
    GeminiStream,
    event_data,
)
from vtbench.gateway.usage import gemini_usage, openai_usage


def test_events_are_cut_the_same_at_every_chunk_boundary() -> None:
    stream = b"".join(wire.anthropic_events(call("Bash", {"command": "ls"}, text="hi"), "m"))
    whole = list(EventSplitter().feed(stream))
    for cut in range(1, len(stream)):
        splitter = EventSplitter()
        events = [*splitter.feed(stream[:cut]), *splitter.feed(stream[cut:])]
        assert events == whole
        assert splitter.rest() == b""


def test_crlf_delimited_events_are_cut_and_read() -> None:
    raw = b'event: ping\r\ndata: {"type": "ping"}\r\n\r\ndata: [DONE]\r\n\r\n'
    events = list(EventSplitter().feed(raw))
    assert len(events) == 2
    assert event_data(events[0]) == {"type": "ping"}
    assert event_data(events[1]) is None


def test_message_delta_usage_replaces_the_start_counts_instead_of_adding() -> None:
    watcher = AnthropicStream()
    watcher.feed({"type": "message_start", "message": {"usage": {
        "input_tokens": 10, "cache_read_input_tokens": 4, "output_tokens": 1}}})
    watcher.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                  "usage": {"input_tokens": 10, "cache_read_input_tokens": 4,
                            "output_tokens": 30}})
    usage = watcher.usage()
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (10, 4, 30)


def test_chat_usage_comes_from_the_usage_chunk_only() -> None:
    watcher = ChatStream()
    for event in wire.chat_chunks(say("hello", input_tokens=8, output_tokens=2,
                                      cache_read_tokens=2), "m", include_usage=True):
        data = event_data(event)
        if data is not None:
            watcher.feed(data)
    usage = watcher.usage()
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (8, 2, 2)
    assert watcher.result()["choices"][0]["message"]["content"] == "hello"


def test_openai_cached_tokens_are_taken_out_of_the_input_count() -> None:
    usage = openai_usage({"input_tokens": 100, "output_tokens": 5,
                          "input_tokens_details": {"cached_tokens": 60}})
    assert (usage.input_tokens, usage.cache_read_tokens, usage.total) == (40, 60, 105)


def test_missing_or_malformed_usage_counts_nothing_and_says_so() -> None:
    assert not openai_usage(None).reported
    assert openai_usage({"prompt_tokens": -3, "completion_tokens": "x"}).total == 0


def test_gemini_usage_counts_cached_tokens_inside_the_prompt_and_thoughts_as_output() -> None:
    usage = gemini_usage({"promptTokenCount": 100, "cachedContentTokenCount": 60,
                          "toolUsePromptTokenCount": 5, "candidatesTokenCount": 7,
                          "thoughtsTokenCount": 30, "totalTokenCount": 142})
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (45, 60, 37)
    assert usage.total == 142 and usage.reported
    assert not gemini_usage(None).reported


def test_a_gemini_stream_keeps_the_last_usage_and_joins_its_text_pieces() -> None:
    watcher = GeminiStream()
    reply = call("run_shell_command", {"command": "ls"}, text="Let me look.",
                 input_tokens=10, output_tokens=4, thoughts_tokens=3)
    for chunk in wire.gemini_chunks(reply, "gemini-test"):
        watcher.feed(chunk)
    usage = watcher.usage()
    assert (usage.input_tokens, usage.output_tokens) == (10, 7)
    [candidate] = watcher.result()["candidates"]
    assert candidate["content"]["parts"] == [
        {"text": "Let me look."}, {"functionCall": {"name": "run_shell_command",
                                                    "args": {"command": "ls"}}}]
    assert candidate["finishReason"] == "STOP"


def test_gemini_thought_text_is_not_joined_to_answer_text() -> None:
    watcher = GeminiStream()
    for part in ({"text": "plan ", "thought": True}, {"text": "more", "thought": True},
                 {"text": "answer"}):
        watcher.feed({"candidates": [{"content": {"parts": [part]}}]})
    parts = watcher.result()["candidates"][0]["content"]["parts"]
    assert parts == [{"text": "plan more", "thought": True}, {"text": "answer"}]
