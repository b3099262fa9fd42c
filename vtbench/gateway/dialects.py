"""The wire APIs the gateway speaks toward the agent, one :class:`Dialect` each.

A dialect knows its route, its provider, how to read usage from a whole answer, how to
watch a stream, whether the body or the route decides that the answer streams, what (if
anything) to change in a request so the provider reports usage, and how that provider
shapes an error, so that refusals look native to the agent's CLI.

The Gemini API names the model in the path (``/v1beta/models/{model}:generateContent``) and
streams by route (``:streamGenerateContent``; SSE with ``alt=sse``, else one JSON array).
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from vtbench.gateway.config import Provider
from vtbench.gateway.streams import (
    AnthropicStream,
    ChatStream,
    GeminiStream,
    NoUsageStream,
    ResponsesStream,
    StreamAccumulator,
)
from vtbench.gateway.usage import Usage, anthropic_usage, gemini_answer_usage, openai_usage

ErrorKind = Literal["budget", "bad_request", "too_large", "not_configured", "unreachable"]


@dataclass(frozen=True)
class Prepared:
    """The request to send upstream and how to treat the answer."""

    body: bytes
    stream: bool
    hide_usage_chunk: bool = False
    """The gateway asked for a usage-only chunk the agent did not ask for: drop it."""


# (HTTP status, Anthropic error type, OpenAI error type, OpenAI code, Google status) per
# error kind. Budget refusals are 400s, which no CLI or SDK retries, shaped as each
# provider's own out-of-credit error (Anthropic: ``invalid_request_error``, as for a low
# credit balance; OpenAI: ``insufficient_quota``; Google: ``FAILED_PRECONDITION``, as for
# billing not enabled). OpenAI itself sends that one as a 429, but Codex then prints a fixed
# "Quota exceeded" line instead of our message and SDKs retry a 429; Google's
# ``RESOURCE_EXHAUSTED`` is a 429 too, which the Gemini CLI retries. As a 400, Claude Code,
# Codex and the Gemini CLI all show the message (tested with the real CLIs).
_ERRORS: dict[ErrorKind, tuple[int, str, str, str | None, str]] = {
    "budget": (400, "invalid_request_error", "insufficient_quota", "insufficient_quota",
               "FAILED_PRECONDITION"),
    "bad_request": (400, "invalid_request_error", "invalid_request_error", None,
                    "INVALID_ARGUMENT"),
    "too_large": (413, "request_too_large", "invalid_request_error", None, "INVALID_ARGUMENT"),
    "not_configured": (400, "invalid_request_error", "invalid_request_error", None,
                       "FAILED_PRECONDITION"),
    "unreachable": (502, "api_error", "server_error", None, "UNAVAILABLE"),
}


@dataclass(frozen=True)
class Dialect:
    name: str
    provider: Provider
    path: str
    body_usage: Callable[[Any], Usage]
    """Usage of a whole answer (a JSON object, or an array where ``array_body``)."""
    new_stream: Callable[[], StreamAccumulator]
    asks_stream_usage: bool = False
    """Chat Completions reports stream usage only when ``stream_options`` asks for it."""
    streams: bool | None = None
    """None: the body's ``stream`` field decides; True or False: the route does (Gemini)."""
    model_in_path: bool = False
    """The model is the route's ``{model}`` (Gemini), not the body's ``model``."""
    array_body: bool = False
    """A whole answer may be a JSON array of chunks (Gemini streams without ``alt=sse``)."""
    limit_paths: tuple[tuple[str, ...], ...] = ()
    """Where a request names its output limit; the first is where the gateway writes one."""
    metered: bool = True
    """False for routes that cost nothing (token counting): they reserve no budget."""

    def prepare(self, raw: bytes, payload: dict[str, Any]) -> Prepared:
        stream = payload.get("stream") is True if self.streams is None else self.streams
        if not (stream and self.asks_stream_usage):
            return Prepared(raw, stream)
        options = payload.get("stream_options")
        options = options if isinstance(options, dict) else {}
        agent_asked = options.get("include_usage") is True
        body = {**payload, "stream_options": {**options, "include_usage": True}}
        return Prepared(json.dumps(body).encode(), stream, hide_usage_chunk=not agent_asked)

    def named_limit(self, payload: dict[str, Any]) -> int | None:
        """The output limit the request names (the largest, where it names several); a
        ValueError names a limit that is not a count."""
        named = []
        for path in self.limit_paths:
            value: Any = payload
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{'.'.join(path)} must be a count of tokens")
            named.append(value)
        return max(named) if named else None

    def with_limit(self, payload: dict[str, Any], limit: int) -> dict[str, Any]:
        """The request with an output limit written where this API reads it."""
        *parents, leaf = self.limit_paths[0]
        if not parents:
            return {**payload, leaf: limit}
        [parent] = parents
        inner = payload.get(parent)
        return {**payload, parent: {**(inner if isinstance(inner, dict) else {}), leaf: limit}}

    def error(self, kind: ErrorKind, message: str) -> tuple[int, dict[str, Any]]:
        status, anthropic_type, openai_type, code, google_status = _ERRORS[kind]
        if self.provider == "anthropic":
            return status, {"type": "error", "error": {"type": anthropic_type, "message": message}}
        if self.provider == "gemini":
            return status, {"error": {"code": status, "message": message,
                                      "status": google_status}}
        return status, {
            "error": {"message": message, "type": openai_type, "param": None, "code": code}}


def _usage_field(read: Callable[[Any], Usage]) -> Callable[[dict[str, Any]], Usage]:
    return lambda body: read(body.get("usage"))


ANTHROPIC_MESSAGES = Dialect(
    "anthropic-messages", "anthropic", "/v1/messages",
    _usage_field(anthropic_usage), AnthropicStream, limit_paths=(("max_tokens",),))
ANTHROPIC_COUNT_TOKENS = Dialect(
    "anthropic-count-tokens", "anthropic", "/v1/messages/count_tokens",
    lambda body: Usage(), NoUsageStream, metered=False)
OPENAI_CHAT = Dialect(
    "openai-chat", "openai", "/v1/chat/completions",
    _usage_field(openai_usage), ChatStream, asks_stream_usage=True,
    limit_paths=(("max_completion_tokens",), ("max_tokens",)))
OPENAI_RESPONSES = Dialect(
    "openai-responses", "openai", "/v1/responses",
    _usage_field(openai_usage), ResponsesStream, limit_paths=(("max_output_tokens",),))

_GEMINI_LIMIT = (("generationConfig", "maxOutputTokens"),)
GEMINI_GENERATE = Dialect(
    "gemini-generate", "gemini", "/v1beta/models/{model}:generateContent",
    gemini_answer_usage, GeminiStream, streams=False, model_in_path=True,
    limit_paths=_GEMINI_LIMIT)
GEMINI_STREAM = Dialect(
    "gemini-stream", "gemini", "/v1beta/models/{model}:streamGenerateContent",
    gemini_answer_usage, GeminiStream, streams=True, model_in_path=True, array_body=True,
    limit_paths=_GEMINI_LIMIT)
GEMINI_COUNT_TOKENS = Dialect(
    "gemini-count-tokens", "gemini", "/v1beta/models/{model}:countTokens",
    lambda body: Usage(), NoUsageStream, streams=False, model_in_path=True, metered=False)

DIALECTS = (ANTHROPIC_MESSAGES, ANTHROPIC_COUNT_TOKENS, OPENAI_CHAT, OPENAI_RESPONSES,
            GEMINI_GENERATE, GEMINI_STREAM, GEMINI_COUNT_TOKENS)
GEMINI_PREFIX = "/v1beta/"
"""Any other Gemini API route is refused with Google's own 404 (see :func:`not_served`)."""


def not_served(method: str, path: str) -> tuple[int, dict[str, Any]]:
    """Google's 404 for a Gemini API route the gateway does not serve."""
    message = (f"the VibeTraining-Bench gateway does not serve {method} {path}; it serves "
               "generateContent, streamGenerateContent and countTokens")
    return 404, {"error": {"code": 404, "message": message, "status": "NOT_FOUND"}}


def is_usage_only_chunk(event: dict[str, Any]) -> bool:
    """The Chat Completions chunk that ``include_usage`` adds: usage and no choices."""
    return event.get("usage") is not None and not event.get("choices")
