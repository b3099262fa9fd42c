"""Server-sent events for ``stream: true`` on ``/v1/completions`` and ``/v1/chat/completions``.

Streamed requests go through the batch engine like any other. A choice's text is sent as
its tokens are made (the engine's per-step listener), except where the whole reply is
needed first: with logprobs (computed when the batch ends) and with tools (a reply is known
to be a call only once it is whole), each choice comes in one chunk when its request is
answered.

Guarantees: the deltas of a choice add up to the text the same request gets unstreamed;
text is sent only once it cannot change: not while the last token may be part of an
unfinished character (U+FFFD), nor the tail that may be the start of a stop string. Each
choice ends with a chunk holding its ``finish_reason``; with
``stream_options.include_usage`` every chunk has ``"usage": null`` and a last chunk with no
choices has the usage; the stream ends with ``data: [DONE]``. A request that fails once
the stream has begun ends with an ``error`` event, then ``[DONE]``.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from vtbench.models import wire
from vtbench.models.tools import ToolUse, assistant_message

if TYPE_CHECKING:
    from vtbench.models.batching import BatchEngine, Completion, GenerationRequest

DONE = b"data: [DONE]\n\n"
_Item = tuple[int, "list[tuple[int, int]] | Future[list[Completion]]"]


class IncrementalText:
    """One choice's text as its tokens arrive: what may be sent without being taken back.

    Each token decodes only a short window (the tokens since the text last grew), as
    vLLM's incremental detokenizer does, so a long stream costs linear time."""

    def __init__(self, decode: Callable[[list[int]], str], stops: tuple[str, ...]) -> None:
        self.decode, self.stops = decode, [s for s in stops if s]
        self.tokens: list[int] = []
        self.prefix_offset = self.read_offset = 0
        self.prefix = self.text = self.sent = ""
        """``prefix``: the decode of ``tokens[prefix_offset:read_offset]``."""

    def add(self, token: int) -> str:
        """The text that ``token`` makes sendable (often empty)."""
        self.tokens.append(token)
        window = self.decode(self.tokens[self.prefix_offset:])
        if len(window) > len(self.prefix) and not window.endswith("\ufffd"):
            self.text += window[len(self.prefix):]
            self.prefix_offset, self.read_offset = self.read_offset, len(self.tokens)
            self.prefix = self.decode(self.tokens[self.prefix_offset:self.read_offset])
        visible = self._without_stop(self.text)
        delta, self.sent = visible[len(self.sent):], visible
        return delta

    def _without_stop(self, text: str) -> str:
        if not self.stops:
            return text
        cuts = [at for at in (text.find(s) for s in self.stops) if at >= 0]
        if cuts:
            return text[:min(cuts)]
        held = max((k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])),
                   default=0)
        return text[:len(text) - held]

    def finish(self, final: str) -> str:
        """What remains of the answered text ``final`` after what was sent."""
        return final[len(self.sent):] if final.startswith(self.sent) else ""


class Chunks(Protocol):
    """The route's chunk shapes (one choice at a time)."""

    object: str

    def opening(self, index: int) -> dict[str, Any] | None: ...
    def delta(self, index: int, text: str) -> dict[str, Any]: ...
    def ending(self, index: int, completion: "Completion",
               rest: str | None) -> list[dict[str, Any]]:
        """The choice's last chunks; ``rest`` None: nothing of it was sent yet."""
        ...


class CompletionChunks:
    object = "text_completion"

    def opening(self, index: int) -> None:
        return None

    def delta(self, index: int, text: str) -> dict[str, Any]:
        return {"index": index, "text": text, "logprobs": None, "finish_reason": None}

    def ending(self, index: int, completion: "Completion",
               rest: str | None) -> list[dict[str, Any]]:
        logprobs = wire.completion_logprobs(completion) if rest is None else None
        return [{"index": index, "text": completion.text if rest is None else rest,
                 "logprobs": logprobs, "finish_reason": completion.finish_reason}]


@dataclass
class ChatChunks:
    use: ToolUse | None
    object: str = "chat.completion.chunk"

    def opening(self, index: int) -> dict[str, Any]:
        return self._chunk(index, {"role": "assistant", "content": ""})

    def delta(self, index: int, text: str) -> dict[str, Any]:
        return self._chunk(index, {"content": text})

    def ending(self, index: int, completion: "Completion",
               rest: str | None) -> list[dict[str, Any]]:
        message, reason = assistant_message(completion, self.use)
        chunks = []
        if rest is None and message["content"]:
            chunks.append(self._chunk(index, {"content": message["content"]},
                                      wire.chat_logprobs(completion)))
        elif rest:
            chunks.append(self._chunk(index, {"content": rest}))
        if "tool_calls" in message:
            calls = [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]
            chunks.append(self._chunk(index, {"tool_calls": calls}))
        return [*chunks, self._chunk(index, {}, finish_reason=reason)]

    @staticmethod
    def _chunk(index: int, delta: dict[str, Any], logprobs: Any = None,
               finish_reason: str | None = None) -> dict[str, Any]:
        return {"index": index, "delta": delta, "logprobs": logprobs,
                "finish_reason": finish_reason}


@dataclass
class EventStream:
    """One streamed request: its engine requests (each with the index of its first
    choice), submitted at construction so the batch is not delayed by the response."""

    engine: "BatchEngine"
    jobs: "list[tuple[GenerationRequest, int]]"
    chunks: Chunks
    envelope: dict[str, Any]
    per_step: bool
    usage_of: "list[list[int]] | None" = None
    """The prompts' token ids when ``include_usage`` asks for a usage chunk."""
    queue: "asyncio.Queue[_Item]" = field(default_factory=asyncio.Queue)
    texts: dict[int, IncrementalText] = field(default_factory=dict)
    failed: bool = False

    def __post_init__(self) -> None:
        loop = asyncio.get_running_loop()
        for number, (request, first) in enumerate(self.jobs):
            listener = None
            if self.per_step:
                self.texts.update({first + j: IncrementalText(self.engine.codec.decode,
                                                              request.stop)
                                   for j in range(request.n)})
                listener = _poster(loop, self.queue, number)
            self.engine.submit(request, listener).add_done_callback(
                _poster(loop, self.queue, number))
        self.envelope = {**self.envelope, "object": self.chunks.object}
        if self.usage_of is not None:
            self.envelope["usage"] = None
        # Every chunk is this envelope around one choice: encoded once, not per token.
        head = json.dumps({**self.envelope, "choices": []}, ensure_ascii=False)
        self._head = b"data: " + head[:-2].encode()  # up to the choices list's "["

    def response(self) -> Any:
        from starlette.responses import StreamingResponse

        return StreamingResponse(self.events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def events(self) -> AsyncIterator[bytes]:
        indices = sorted(first + j for request, first in self.jobs for j in range(request.n))
        openings = [self.chunks.opening(i) for i in indices]
        if any(c is not None for c in openings):
            yield b"".join(self._event(c) for c in openings if c is not None)
        answered: list[list[Completion]] = []
        while len(answered) < len(self.jobs):
            out = [self._take(await self.queue.get(), answered)]
            while not self.queue.empty():  # whatever else is ready leaves in the same write
                out.append(self._take(self.queue.get_nowait(), answered))
            yield b"".join(out)
            if self.failed:
                yield DONE
                return
        if self.usage_of is not None:
            yield _sse({**self.envelope, "choices": [],
                        "usage": wire.usage(self.usage_of, answered)})
        yield DONE

    def _take(self, item: _Item, answered: "list[list[Completion]]") -> bytes:
        number, payload = item
        first = self.jobs[number][1]
        if not isinstance(payload, Future):
            deltas = ((first + sample, self.texts[first + sample].add(token))
                      for sample, token in payload)
            return b"".join(self._event(self.chunks.delta(i, d)) for i, d in deltas if d)
        error = payload.exception()
        if error is not None:
            self.failed = True
            return _sse(wire.error_body(f"generation failed: {type(error).__name__}: {error}",
                                        "server_error"))
        answered.append(payload.result())
        out = []
        for j, completion in enumerate(answered[-1]):
            text = self.texts.get(first + j)
            rest = text.finish(completion.text) if text is not None else None
            out += [self._event(c) for c in self.chunks.ending(first + j, completion, rest)]
        return b"".join(out)

    def _event(self, choice: dict[str, Any]) -> bytes:
        return self._head + json.dumps(choice, ensure_ascii=False).encode() + b"]}\n\n"


def _poster(loop: asyncio.AbstractEventLoop,
            queue: "asyncio.Queue[_Item]", number: int) -> Callable[[Any], None]:
    """Called on the engine's thread: hands its argument to the event loop's queue."""

    def post(payload: Any) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, (number, payload))

    return post


def _sse(content: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(content, ensure_ascii=False).encode() + b"\n\n"
