"""The providers' wire formats, written out for a scripted reply.

Anthropic Messages (body and SSE events), OpenAI Chat Completions (body and chunks), OpenAI
Responses (body and SSE events) and the Gemini API (``GenerateContentResponse`` bodies and
their ``alt=sse`` stream), shaped like the real APIs' answers so that real clients (Claude
Code, Codex, the Gemini CLI, the SDKs) accept them.
"""

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


@dataclass(frozen=True)
class Reply:
    """One scripted model turn: text, a tool call (or both), or a provider error."""

    text: str | None = None
    tool: str | None = None
    """Tool name, e.g. ``Bash`` (Claude Code) or ``exec_command`` (Codex)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    input_tokens: int = 11
    """Uncached input tokens (OpenAI: prompt tokens minus cached ones)."""
    output_tokens: int = 7
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    """Anthropic only; OpenAI and Gemini have no cache-write count."""
    thoughts_tokens: int = 0
    """Gemini only: thinking tokens, reported apart from (and billed like) output tokens."""
    status: int = 200
    """Non-200: answer this status with the provider's error body."""
    error_message: str = "scripted upstream error"
    pause: bool = False
    """Streams only: after the first events, wait for ``ScriptedUpstream.gate``."""
    stream_error: str | None = None
    """Anthropic and Gemini streams only: after the first event, send this error and stop."""


def say(text: str, **usage: int) -> Reply:
    return Reply(text=text, **usage)  # type: ignore[arg-type]


def call(tool: str, arguments: dict[str, Any], text: str | None = None, **usage: int) -> Reply:
    return Reply(text=text, tool=tool, arguments=arguments, **usage)  # type: ignore[arg-type]


def fail(status: int, message: str = "scripted upstream error") -> Reply:
    return Reply(status=status, error_message=message)


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()


_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                  429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def error_body(provider: str, status: int, message: str) -> dict[str, Any]:
    if provider == "gemini":
        return {"error": {"code": status, "message": message,
                          "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}}
    if provider == "anthropic":
        kind = {429: "rate_limit_error", 529: "overloaded_error", 400: "invalid_request_error"}
        return {"type": "error", "error": {"type": kind.get(status, "api_error"),
                                           "message": message}}
    return {"error": {"message": message, "type": "server_error" if status >= 500
                      else "invalid_request_error", "param": None, "code": None}}


# --- Anthropic Messages -------------------------------------------------------------------

def _anthropic_usage(reply: Reply, output_tokens: int) -> dict[str, int]:
    return {"input_tokens": reply.input_tokens,
            "cache_creation_input_tokens": reply.cache_write_tokens,
            "cache_read_input_tokens": reply.cache_read_tokens,
            "output_tokens": output_tokens}


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text is not None:
        blocks.append({"type": "text", "text": reply.text})
    if reply.tool is not None:
        blocks.append({"type": "tool_use", "id": new_id("toolu"), "name": reply.tool,
                       "input": reply.arguments})
    return blocks


def anthropic_message(reply: Reply, model: str) -> dict[str, Any]:
    return {"id": new_id("msg"), "type": "message", "role": "assistant", "model": model,
            "content": _anthropic_blocks(reply),
            "stop_reason": "tool_use" if reply.tool else "end_turn", "stop_sequence": None,
            "usage": _anthropic_usage(reply, reply.output_tokens)}


def anthropic_events(reply: Reply, model: str) -> list[bytes]:
    message = anthropic_message(reply, model)
    start = {**message, "content": [], "stop_reason": None,
             "usage": _anthropic_usage(reply, 1)}
    events = [sse({"type": "message_start", "message": start}, "message_start"),
              sse({"type": "ping"}, "ping")]
    if reply.stream_error is not None:
        error = {"type": "overloaded_error", "message": reply.stream_error}
        return [*events, sse({"type": "error", "error": error}, "error")]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening, deltas = {"type": "text", "text": ""}, [
                {"type": "text_delta", "text": part} for part in _halves(block["text"])]
        else:
            opening = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": part}
                      for part in _halves(json.dumps(block["input"]))]
        events.append(sse({"type": "content_block_start", "index": index,
                           "content_block": opening}, "content_block_start"))
        events += [sse({"type": "content_block_delta", "index": index, "delta": delta},
                       "content_block_delta") for delta in deltas]
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    events.append(sse({"type": "message_delta",
                       "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                       "usage": {"output_tokens": reply.output_tokens}}, "message_delta"))
    events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part] or [""]


# --- OpenAI Chat Completions -----------------------------------------------------------------

def _chat_usage(reply: Reply) -> dict[str, Any]:
    prompt = reply.input_tokens + reply.cache_read_tokens
    return {"prompt_tokens": prompt, "completion_tokens": reply.output_tokens,
            "total_tokens": prompt + reply.output_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.cache_read_tokens}}


def _chat_tool_calls(reply: Reply) -> list[dict[str, Any]]:
    if reply.tool is None:
        return []
    return [{"id": new_id("call"), "type": "function",
             "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)}}]


def chat_completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.tool is not None:
        message["tool_calls"] = _chat_tool_calls(reply)
    return {"id": new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if reply.tool else "stop"}],
            "usage": _chat_usage(reply)}


def chat_chunks(reply: Reply, model: str, include_usage: bool) -> list[bytes]:
    head = {"id": new_id("chatcmpl"), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return sse({**head, "choices": [choice], **extra})

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": part}) for part in _halves(reply.text or "") if reply.text]
    for index, tool_call in enumerate(_chat_tool_calls(reply)):
        chunks.append(chunk({"tool_calls": [{"index": index, "id": tool_call["id"],
                                             "type": "function", "function": {
                                                 "name": tool_call["function"]["name"],
                                                 "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
                   for part in _halves(tool_call["function"]["arguments"])]
    chunks.append(chunk({}, "tool_calls" if reply.tool else "stop"))
    if include_usage:
        chunks.append(sse({**head, "choices": [], "usage": _chat_usage(reply)}))
    return [*chunks, sse("[DONE]")]


# --- OpenAI Responses ------------------------------------------------------------------------

def _responses_output(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text is not None:
        items.append({"type": "message", "id": new_id("msg"), "role": "assistant",
                      "status": "completed", "content": [
                          {"type": "output_text", "text": reply.text, "annotations": []}]})
    if reply.tool is not None:
        items.append({"type": "function_call", "id": new_id("fc"), "call_id": new_id("call"),
                      "name": reply.tool, "arguments": json.dumps(reply.arguments),
                      "status": "completed"})
    return items


def responses_body(reply: Reply, model: str) -> dict[str, Any]:
    total_in = reply.input_tokens + reply.cache_read_tokens
    return {"id": new_id("resp"), "object": "response", "created_at": int(time.time()),
            "status": "completed", "model": model, "output": _responses_output(reply),
            "usage": {"input_tokens": total_in,
                      "input_tokens_details": {"cached_tokens": reply.cache_read_tokens},
                      "output_tokens": reply.output_tokens,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": total_in + reply.output_tokens}}


def responses_events(reply: Reply, model: str) -> list[bytes]:
    final = responses_body(reply, model)
    created = {**final, "status": "in_progress", "output": [], "usage": None}
    sequence = itertools.count()

    def event(kind: str, **data: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(sequence), **data}, kind)

    events = [event("response.created", response=created),
              event("response.in_progress", response=created)]
    for index, item in enumerate(final["output"]):
        events.append(event("response.output_item.added", output_index=index,
                            item={**item, "status": "in_progress"}))
        if item["type"] == "message":
            for part in _halves(item["content"][0]["text"]):
                events.append(event("response.output_text.delta", item_id=item["id"],
                                    output_index=index, content_index=0, delta=part))
        events.append(event("response.output_item.done", output_index=index, item=item))
    events.append(event("response.completed", response=final))
    return events


# --- Gemini API ------------------------------------------------------------------------------

def gemini_usage(reply: Reply) -> dict[str, Any]:
    """``usageMetadata``: the prompt count includes the cached tokens, thoughts are apart."""
    prompt = reply.input_tokens + reply.cache_read_tokens
    usage: dict[str, Any] = {
        "promptTokenCount": prompt, "candidatesTokenCount": reply.output_tokens,
        "totalTokenCount": prompt + reply.output_tokens + reply.thoughts_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    if reply.cache_read_tokens:
        usage["cachedContentTokenCount"] = reply.cache_read_tokens
    if reply.thoughts_tokens:
        usage["thoughtsTokenCount"] = reply.thoughts_tokens
    return usage


def _gemini_parts(reply: Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if reply.text is not None:
        parts.append({"text": reply.text})
    if reply.tool is not None:
        parts.append({"functionCall": {"name": reply.tool, "args": reply.arguments}})
    return parts


def _gemini_chunk(parts: list[dict[str, Any]], model: str, response_id: str,
                  usage: dict[str, Any], finish: bool = False) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
            "responseId": response_id}


def gemini_response(reply: Reply, model: str) -> dict[str, Any]:
    """A whole ``generateContent`` answer (a function call still ends with ``STOP``)."""
    return _gemini_chunk(_gemini_parts(reply), model, new_id("resp"), gemini_usage(reply),
                         finish=True)


def gemini_chunks(reply: Reply, model: str) -> list[dict[str, Any]]:
    """A ``streamGenerateContent`` answer as Google sends it: text in pieces, each function
    call whole, every chunk with ``usageMetadata`` and only the last one complete."""
    response_id = new_id("resp")
    prompt = reply.input_tokens + reply.cache_read_tokens
    partial = {"promptTokenCount": prompt, "totalTokenCount": prompt}
    pieces = [[{"text": part}] for part in _halves(reply.text)] if reply.text else []
    if reply.tool is not None:
        pieces.append([{"functionCall": {"name": reply.tool, "args": reply.arguments}}])
    pieces = pieces or [[{"text": ""}]]
    chunks = [_gemini_chunk(parts, model, response_id, partial) for parts in pieces[:-1]]
    chunks.append(_gemini_chunk(pieces[-1], model, response_id, gemini_usage(reply),
                                finish=True))
    if reply.stream_error is not None:
        error = error_body("gemini", 503, reply.stream_error)
        return [chunks[0] if len(chunks) > 1 else
                _gemini_chunk([{"text": ""}], model, response_id, partial), error]
    return chunks


def gemini_events(reply: Reply, model: str) -> list[bytes]:
    """The ``alt=sse`` form: one ``data:`` line per chunk, CRLF-delimited like Google's."""
    return [f"data: {json.dumps(chunk)}\r\n\r\n".encode()
            for chunk in gemini_chunks(reply, model)]
