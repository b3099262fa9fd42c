"""Server-sent events: cut a byte stream into whole events, read usage, rebuild the answer.

The proxy forwards each event the moment its last byte arrives, so the agent sees the
stream as the upstream sends it; these accumulators watch the same events to read the
provider's usage and to rebuild the complete answer for the trajectory log. A malformed
event is forwarded untouched and ignored here.
"""

import json
from collections.abc import Iterator
from typing import Any, Protocol

from vtbench.gateway.usage import Usage, anthropic_usage, gemini_usage, openai_usage

_DELIMITERS = (b"\r\n\r\n", b"\n\n", b"\r\r")


class EventSplitter:
    """Feeds raw chunks, yields complete events (delimiter included) as raw bytes."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        self._buffer += chunk
        while True:
            cuts = [(i, len(d)) for d in _DELIMITERS if (i := self._buffer.find(d)) >= 0]
            if not cuts:
                return
            index, size = min(cuts)
            event, self._buffer = self._buffer[: index + size], self._buffer[index + size :]
            yield event

    def rest(self) -> bytes:
        """Bytes after the last complete event (a stream cut mid-event)."""
        rest, self._buffer = self._buffer, b""
        return rest


def event_data(raw: bytes) -> dict[str, Any] | None:
    """The JSON object in an event's ``data:`` lines, or None (``[DONE]``, comments, junk)."""
    lines = raw.decode("utf-8", "replace").splitlines()
    data = "\n".join(line[5:].removeprefix(" ") for line in lines if line.startswith("data:"))
    if not data or data == "[DONE]":
        return None
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


class StreamAccumulator(Protocol):
    def feed(self, event: dict[str, Any]) -> None: ...
    def usage(self) -> Usage: ...
    def result(self) -> dict[str, Any]: ...


class AnthropicStream:
    """Messages stream: usage from ``message_start`` overridden by ``message_delta``."""

    def __init__(self) -> None:
        self._message: dict[str, Any] = {"content": []}
        self._usage: dict[str, Any] | None = None
        self._json: dict[int, str] = {}

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            self._message = {**event["message"], "content": []}
            self._usage = dict(event["message"].get("usage") or {})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            self._message["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            self._delta(event.get("index"), event.get("delta") or {})
        elif kind == "content_block_stop":
            self._finish_block(event.get("index"))
        elif kind == "message_delta":
            self._message.update(event.get("delta") or {})
            # message_delta counts are cumulative: they replace, never add to, the start's.
            delta_usage = {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            self._usage = {**(self._usage or {}), **delta_usage}
        elif kind == "error":
            self._message["error"] = event.get("error")

    def _block(self, index: Any) -> dict[str, Any] | None:
        blocks = self._message["content"]
        return blocks[index] if isinstance(index, int) and 0 <= index < len(blocks) else None

    def _delta(self, index: Any, delta: dict[str, Any]) -> None:
        block = self._block(index)
        if block is None:
            return
        kind = delta.get("type")
        if kind == "input_json_delta":
            self._json[index] = self._json.get(index, "") + str(delta.get("partial_json", ""))
        else:
            for field in ("text", "thinking", "signature"):
                if field in delta:
                    block[field] = str(block.get(field, "")) + str(delta[field])

    def _finish_block(self, index: Any) -> None:
        block = self._block(index)
        if block is not None and index in self._json:
            text = self._json.pop(index)
            try:
                block["input"] = json.loads(text) if text else {}
            except ValueError:
                block["input"] = text

    def usage(self) -> Usage:
        return anthropic_usage(self._usage)

    def result(self) -> dict[str, Any]:
        return {**self._message, "usage": self._usage}


class ChatStream:
    """Chat Completions stream: usage from the final chunk (``include_usage``)."""

    def __init__(self) -> None:
        self._head: dict[str, Any] = {}
        self._choices: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> None:
        for key in ("id", "model", "created", "system_fingerprint"):
            if key in event:
                self._head[key] = event[key]
        if isinstance(event.get("usage"), dict):
            self._usage = event["usage"]
        for choice in event.get("choices") or []:
            if isinstance(choice, dict):
                self._choice(choice)

    def _choice(self, chunk: dict[str, Any]) -> None:
        index = chunk.get("index", 0)
        choice = self._choices.setdefault(index, {"index": index, "message": {"content": ""}})
        if chunk.get("finish_reason") is not None:
            choice["finish_reason"] = chunk["finish_reason"]
        delta = chunk.get("delta") or {}
        message = choice["message"]
        if "role" in delta:
            message["role"] = delta["role"]
        if isinstance(delta.get("content"), str):
            message["content"] += delta["content"]
        for call in delta.get("tool_calls") or []:
            calls = message.setdefault("tool_calls", {})
            slot = calls.setdefault(call.get("index", 0), {"function": {"arguments": ""}})
            for key in ("id", "type"):
                if key in call:
                    slot[key] = call[key]
            function = call.get("function") or {}
            if "name" in function:
                slot["function"]["name"] = function["name"]
            slot["function"]["arguments"] += str(function.get("arguments") or "")

    def usage(self) -> Usage:
        return openai_usage(self._usage)

    def result(self) -> dict[str, Any]:
        choices = []
        for index in sorted(self._choices):
            choice = self._choices[index]
            calls = choice["message"].get("tool_calls")
            if isinstance(calls, dict):
                choice["message"]["tool_calls"] = [calls[i] for i in sorted(calls)]
            choices.append(choice)
        return {**self._head, "object": "chat.completion", "choices": choices,
                "usage": self._usage}


class ResponsesStream:
    """Responses stream: the final response object carries the usage."""

    _FINAL = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self) -> None:
        self._response: dict[str, Any] = {}
        self._items: list[Any] = []

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.output_item.done":
            self._items.append(event.get("item"))
        elif isinstance(event.get("response"), dict) and (
            kind in self._FINAL or not self._response.get("usage")
        ):
            self._response = event["response"]
        elif kind == "error":
            self._response = {**self._response, "error": event}

    def usage(self) -> Usage:
        return openai_usage(self._response.get("usage"))

    def result(self) -> dict[str, Any]:
        if self._response.get("output"):
            return self._response
        return {**self._response, "output": self._items}


class GeminiStream:
    """Gemini stream (``alt=sse``): every chunk may carry ``usageMetadata``, each a running
    total; the last chunk that carries it counts. Parts are merged per candidate: adjacent
    text pieces join, function calls stay whole. An ``error`` object ends the answer."""

    def __init__(self) -> None:
        self._head: dict[str, Any] = {}
        self._candidates: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> None:
        if "error" in event:
            self._head["error"] = event["error"]
            return
        for key in ("modelVersion", "responseId", "promptFeedback"):
            if key in event:
                self._head[key] = event[key]
        if isinstance(event.get("usageMetadata"), dict):
            self._usage = event["usageMetadata"]
        for candidate in event.get("candidates") or []:
            if isinstance(candidate, dict):
                self._candidate(candidate)

    def _candidate(self, chunk: dict[str, Any]) -> None:
        index = chunk.get("index", 0)
        index = index if isinstance(index, int) else 0
        candidate = self._candidates.setdefault(
            index, {"content": {"role": "model", "parts": []}, "index": index})
        for key, value in chunk.items():
            if key not in ("content", "index"):
                candidate[key] = value
        content = chunk.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict):
                _add_part(candidate["content"]["parts"], part)

    def usage(self) -> Usage:
        return gemini_usage(self._usage)

    def result(self) -> dict[str, Any]:
        candidates = [self._candidates[i] for i in sorted(self._candidates)]
        return {**self._head, "candidates": candidates, "usageMetadata": self._usage}


def _add_part(parts: list[dict[str, Any]], part: dict[str, Any]) -> None:
    """Join a text piece to the text before it (same ``thought`` flag), else append."""
    last = parts[-1] if parts else None
    plain = set(part) <= {"text", "thought"} and isinstance(part.get("text"), str)
    if (plain and last is not None and set(last) <= {"text", "thought"}
            and isinstance(last.get("text"), str) and last.get("thought") == part.get("thought")):
        last["text"] += part["text"]
    else:
        parts.append(dict(part))


class NoUsageStream:
    """A stream that carries no billable usage (e.g. token counting)."""

    def feed(self, event: dict[str, Any]) -> None:
        return None

    def usage(self) -> Usage:
        return Usage()

    def result(self) -> dict[str, Any]:
        return {}
