"""The wire APIs the gateway speaks toward the agent, one :class:`Dialect` each.

A dialect knows its route, its provider, how to read usage from a whole answer, how to
watch a stream, whether the body or the route decides that the answer streams, what (if
anything) to change in a request so the provider reports usage, which fields multiply what
the provider bills (several answers at once) or defer its work past the answer, and how that
provider shapes an error, so that refusals look native to the agent's CLI.

The dialects' routes are the gateway's allow-list: each answers with the usage of the work
it did. Every other route is refused (:func:`not_served`), since the gateway meters an
exchange when it ends and could not meter work that a batch, a file upload or a background
response leaves running.

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

ErrorKind = Literal["budget", "bad_request", "too_large", "not_configured", "unreachable",
                    "not_served"]


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
    "not_served": (404, "not_found_error", "invalid_request_error", None, "NOT_FOUND"),
}


def error_body(provider: Provider, kind: ErrorKind, message: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of an error in the provider's own shape."""
    status, anthropic_type, openai_type, code, google_status = _ERRORS[kind]
    if provider == "anthropic":
        return status, {"type": "error", "error": {"type": anthropic_type, "message": message}}
    if provider == "gemini":
        return status, {"error": {"code": status, "message": message, "status": google_status}}
    return status, {
        "error": {"message": message, "type": openai_type, "param": None, "code": code}}


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
    answer_count_paths: tuple[tuple[str, ...], ...] = ()
    """Where a request asks for several answers at once (Chat Completions ``n``, Gemini
    ``generationConfig.candidateCount``): the provider generates and bills each one, up to the
    output limit, so the budget reserves that limit once per answer."""
    deferring_paths: tuple[tuple[str, ...], ...] = ()
    """Switches that make the provider answer before the work is done (Responses
    ``background``): the usage comes after the exchange has settled, so any value but
    ``false`` is refused."""

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
            value = _field(payload, path)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{'.'.join(path)} must be a count of tokens")
            named.append(value)
        return max(named) if named else None

    def answer_count(self, payload: dict[str, Any]) -> int:
        """How many answers the provider generates and bills for this request (1 unless it
        asks for more); a ValueError names a count that is not one."""
        count = 1
        for path in self.answer_count_paths:
            value = _field(payload, path)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{'.'.join(path)} must be a count of answers (1 or more)")
            count *= value
        return count

    def deferred(self, payload: dict[str, Any]) -> str | None:
        """Why the gateway refuses this request, if it asks for work to finish after its
        answer (whose usage no settlement would see); None when it does not."""
        for path in self.deferring_paths:
            if _field(payload, path) not in (None, False):
                name = ".".join(path)
                return (f"{name} is refused by the VibeTraining-Bench gateway: a request is"
                        " metered by the usage its answer reports, and a request with"
                        f" {name} is answered before its work is done, so it cannot be"
                        f" metered against the episode's budget; send it without {name}")
        return None

    def with_limit(self, payload: dict[str, Any], limit: int) -> dict[str, Any]:
        """The request with an output limit written where this API reads it."""
        *parents, leaf = self.limit_paths[0]
        if not parents:
            return {**payload, leaf: limit}
        [parent] = parents
        inner = payload.get(parent)
        return {**payload, parent: {**(inner if isinstance(inner, dict) else {}), leaf: limit}}

    def error(self, kind: ErrorKind, message: str) -> tuple[int, dict[str, Any]]:
        return error_body(self.provider, kind, message)


def _field(payload: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = payload
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


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
    limit_paths=(("max_completion_tokens",), ("max_tokens",)), answer_count_paths=(("n",),))
OPENAI_RESPONSES = Dialect(
    "openai-responses", "openai", "/v1/responses",
    _usage_field(openai_usage), ResponsesStream, limit_paths=(("max_output_tokens",),),
    deferring_paths=(("background",),))

_GEMINI_LIMIT = (("generationConfig", "maxOutputTokens"),)
_GEMINI_ANSWERS = (("generationConfig", "candidateCount"),)
GEMINI_GENERATE = Dialect(
    "gemini-generate", "gemini", "/v1beta/models/{model}:generateContent",
    gemini_answer_usage, GeminiStream, streams=False, model_in_path=True,
    limit_paths=_GEMINI_LIMIT, answer_count_paths=_GEMINI_ANSWERS)
GEMINI_STREAM = Dialect(
    "gemini-stream", "gemini", "/v1beta/models/{model}:streamGenerateContent",
    gemini_answer_usage, GeminiStream, streams=True, model_in_path=True, array_body=True,
    limit_paths=_GEMINI_LIMIT, answer_count_paths=_GEMINI_ANSWERS)
GEMINI_COUNT_TOKENS = Dialect(
    "gemini-count-tokens", "gemini", "/v1beta/models/{model}:countTokens",
    lambda body: Usage(), NoUsageStream, streams=False, model_in_path=True, metered=False)

DIALECTS = (ANTHROPIC_MESSAGES, ANTHROPIC_COUNT_TOKENS, OPENAI_CHAT, OPENAI_RESPONSES,
            GEMINI_GENERATE, GEMINI_STREAM, GEMINI_COUNT_TOKENS)
_SERVED: dict[Provider, str] = {
    "anthropic": "POST /v1/messages and /v1/messages/count_tokens",
    "openai": "POST /v1/chat/completions and /v1/responses",
    "gemini": "generateContent, streamGenerateContent and countTokens",
}


def not_served(method: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """The provider's own 404 for a route off the gateway's allow-list (the dialects' routes),
    saying why: batches, file uploads, polls of background work and the like are answered
    before their work is done or hold no usage, so the gateway could not meter them."""
    provider = _provider_of(path, headers)
    message = (f"the VibeTraining-Bench gateway does not serve {method} {path}: it serves only"
               f" {_SERVED[provider]}, whose answers report the tokens they used, so that"
               " every request is metered against the episode's budget; batches, file"
               " uploads and background work cannot be metered that way")
    return error_body(provider, "not_served", message)


def _provider_of(path: str, headers: dict[str, str]) -> Provider:
    """Whose API an unserved request was meant for, from its path and headers."""
    if path.startswith(("/v1beta/", "/v1alpha/", "/upload/")) or "x-goog-api-key" in headers:
        return "gemini"
    if ("anthropic-version" in headers or "x-api-key" in headers
            or path.startswith("/v1/messages")):
        return "anthropic"
    return "openai"


def is_usage_only_chunk(event: dict[str, Any]) -> bool:
    """The Chat Completions chunk that ``include_usage`` adds: usage and no choices."""
    return event.get("usage") is not None and not event.get("choices")
