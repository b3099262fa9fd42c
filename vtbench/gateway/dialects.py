"""The wire APIs the gateway speaks toward the agent, one :class:`Dialect` each.

A dialect knows its route, its provider, how to read usage from a whole answer, how to
watch a stream, what (if anything) to change in a request so the provider reports usage,
and how that provider shapes an error, so that refusals look native to the agent's CLI.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from vtbench.gateway.config import Provider
from vtbench.gateway.streams import (
    AnthropicStream,
    ChatStream,
    NoUsageStream,
    ResponsesStream,
    StreamAccumulator,
)
from vtbench.gateway.usage import Usage, anthropic_usage, openai_usage

ErrorKind = Literal["budget", "bad_request", "too_large", "not_configured", "unreachable"]


@dataclass(frozen=True)
class Prepared:
    """The request to send upstream and how to treat the answer."""

    body: bytes
    stream: bool
    hide_usage_chunk: bool = False
    """The gateway asked for a usage-only chunk the agent did not ask for: drop it."""


# (HTTP status, Anthropic error type, OpenAI error type, OpenAI code) per error kind.
# Budget refusals are 400s, which no CLI or SDK retries, shaped as each provider's own
# out-of-credit error (Anthropic: ``invalid_request_error``, as for a low credit balance;
# OpenAI: ``insufficient_quota``). OpenAI itself sends that one as a 429, but Codex then
# prints a fixed "Quota exceeded" line instead of our message and SDKs retry a 429; as a
# 400, Claude Code and Codex both show the message (tested with the real CLIs).
_ERRORS: dict[ErrorKind, tuple[int, int, str, str, str | None]] = {
    "budget": (400, 400, "invalid_request_error", "insufficient_quota", "insufficient_quota"),
    "bad_request": (400, 400, "invalid_request_error", "invalid_request_error", None),
    "too_large": (413, 413, "request_too_large", "invalid_request_error", None),
    "not_configured": (400, 400, "invalid_request_error", "invalid_request_error", None),
    "unreachable": (502, 502, "api_error", "server_error", None),
}


@dataclass(frozen=True)
class Dialect:
    name: str
    provider: Provider
    path: str
    body_usage: Callable[[dict[str, Any]], Usage]
    new_stream: Callable[[], StreamAccumulator]
    asks_stream_usage: bool = False
    """Chat Completions reports stream usage only when ``stream_options`` asks for it."""

    def prepare(self, raw: bytes, payload: dict[str, Any]) -> Prepared:
        stream = payload.get("stream") is True
        if not (stream and self.asks_stream_usage):
            return Prepared(raw, stream)
        options = payload.get("stream_options")
        options = options if isinstance(options, dict) else {}
        agent_asked = options.get("include_usage") is True
        body = {**payload, "stream_options": {**options, "include_usage": True}}
        return Prepared(json.dumps(body).encode(), stream, hide_usage_chunk=not agent_asked)

    def error(self, kind: ErrorKind, message: str) -> tuple[int, dict[str, Any]]:
        anthropic_status, openai_status, anthropic_type, openai_type, code = _ERRORS[kind]
        if self.provider == "anthropic":
            return anthropic_status, {
                "type": "error", "error": {"type": anthropic_type, "message": message}}
        return openai_status, {
            "error": {"message": message, "type": openai_type, "param": None, "code": code}}


def _usage_field(read: Callable[[Any], Usage]) -> Callable[[dict[str, Any]], Usage]:
    return lambda body: read(body.get("usage"))


ANTHROPIC_MESSAGES = Dialect(
    "anthropic-messages", "anthropic", "/v1/messages",
    _usage_field(anthropic_usage), AnthropicStream)
ANTHROPIC_COUNT_TOKENS = Dialect(
    "anthropic-count-tokens", "anthropic", "/v1/messages/count_tokens",
    lambda body: Usage(), NoUsageStream)
OPENAI_CHAT = Dialect(
    "openai-chat", "openai", "/v1/chat/completions",
    _usage_field(openai_usage), ChatStream, asks_stream_usage=True)
OPENAI_RESPONSES = Dialect(
    "openai-responses", "openai", "/v1/responses",
    _usage_field(openai_usage), ResponsesStream)

DIALECTS = (ANTHROPIC_MESSAGES, ANTHROPIC_COUNT_TOKENS, OPENAI_CHAT, OPENAI_RESPONSES)


def is_usage_only_chunk(event: dict[str, Any]) -> bool:
    """The Chat Completions chunk that ``include_usage`` adds: usage and no choices."""
    return event.get("usage") is not None and not event.get("choices")
