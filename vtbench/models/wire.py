"""The OpenAI wire format the model server speaks: request bodies and answer pieces.

Requests are strict pydantic models (an unknown field is a 400, so a typo never passes
unnoticed); fields the OpenAI client echoes back when a harness appends a reply message to
its history (``refusal``, ``annotations``, ``audio``, ``function_call``) are accepted
empty. Answers are plain dicts shaped like OpenAI's (and vLLM's), so the official client
parses them. Nothing here touches the model.
"""

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from vtbench.models.batching import Completion

HARNESS_MODEL_NAME = "candidate"
"""A model name every server answers to besides its own id: the tasks' harnesses send it,
since they cannot know the candidate's folder name."""

FUNCTION_NAME = r"^[A-Za-z0-9_.-]{1,64}$"


MAX_STOP_STRINGS = 16
"""Stop strings per request (OpenAI allows 4): each one is searched for at every token."""
MAX_ROWS_PER_REQUEST = 1024
"""Prompts × ``n`` of one request: the rows it puts into the batch engine."""


def max_request_bytes(context: int) -> int:
    """The largest request body a server with ``context`` tokens reads: 32 bytes a token
    of context, at least 1 MiB. A longer prompt could never fit the context, and encoding
    one costs the tokenizer memory that grows with it (a 30 MB prompt made tokenizers ask
    for 500 MB)."""
    return max(1 << 20, 32 * context)


class BadRequest(ValueError):
    """The caller's mistake that pydantic cannot see (too long a prompt, a bad template)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class BodyTooLarge(ValueError):
    """A request body beyond :func:`max_request_bytes` (a 413, before it is parsed)."""


class ModelNotFound(LookupError):
    """A request names a model this server does not serve (a 404)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StreamOptions(_Strict):
    include_usage: bool = False
    """Send a last chunk with empty ``choices`` and the request's ``usage``."""


class _Sampling(_Strict):
    model: str | None = None
    """The served model's id (``/v1/models``) or ``candidate``; omitted: the served model.
    Any other name is a 404."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Most tokens to generate per choice (default: 16 for completions, the rest of the
    context for chat)."""
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    """0 is greedy: the tokens of a direct greedy ``generate``."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling's probability mass."""
    n: int = Field(default=1, ge=1, le=128)
    """Choices per prompt."""
    stop: str | list[str] | None = Field(default=None, max_length=MAX_STOP_STRINGS)
    """Strings that end a choice; the text stops before the first one (at most 16)."""
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**64)
    """Seeds each choice's sampler: the same seed gives the same text whatever the batch.
    A 64-bit integer, signed or not."""
    ignore_eos: bool = False
    """Generate exactly ``max_tokens`` tokens (vLLM's extension)."""
    stream: bool = False
    """Answer as server-sent events (``data: {chunk}`` lines, then ``data: [DONE]``)."""
    stream_options: StreamOptions | None = None
    """Only with ``stream``."""
    presence_penalty: Literal[0] = 0
    """Penalties are not implemented: only 0 is accepted."""
    frequency_penalty: Literal[0] = 0
    """Penalties are not implemented: only 0 is accepted."""
    user: str | None = None
    """Accepted and ignored."""

    @model_validator(mode="after")
    def _options_need_stream(self) -> "_Sampling":
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed with stream")
        return self


class CompletionRequest(_Sampling):
    prompt: str | list[str]
    """One prompt or several (each gets ``n`` choices, in order)."""
    logprobs: int | None = Field(default=None, ge=0, le=20)
    """Per token: the chosen token's log-probability and this many alternatives."""
    echo: Literal[False] = False
    """Echoing the prompt is not implemented."""


class ContentPart(_Strict):
    type: Literal["text"] = "text"
    """Only text parts: the server serves text models."""
    text: str
    """The part's text; parts are joined without a separator."""


class FunctionCall(_Strict):
    name: str
    """The function called."""
    arguments: str
    """Its arguments as a JSON string (OpenAI's form)."""


class ToolCall(_Strict):
    id: str
    """The call's id, which the ``tool`` message answering it repeats."""
    type: Literal["function"] = "function"
    """Only function tools exist."""
    function: FunctionCall
    """What was called, with which arguments."""


class ChatMessage(_Strict):
    role: str
    """``system``, ``developer``, ``user``, ``assistant``, ``tool`` or a role the chat
    template knows."""
    content: str | list[ContentPart] | None = None
    """The text (``None`` for an assistant turn that only calls tools)."""
    name: str | None = None
    """Accepted; the chat template decides whether it shows."""
    tool_calls: list[ToolCall] | None = None
    """An assistant turn's calls, as the server returned them."""
    tool_call_id: str | None = None
    """A ``tool`` message: the call it answers."""
    refusal: str | None = None
    """Echoed by clients from an earlier reply; ignored."""
    annotations: list[Any] | None = None
    """Echoed by clients from an earlier reply; ignored."""
    audio: None = None
    """Echoed by clients from an earlier reply (always empty here)."""
    function_call: None = None
    """Echoed by clients from an earlier reply (the deprecated form; always empty here)."""

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class FunctionDefinition(_Strict):
    name: str = Field(pattern=FUNCTION_NAME)
    """The name the model calls it by."""
    description: str | None = None
    """What it does, shown to the model."""
    parameters: dict[str, Any] | None = None
    """A JSON schema of its arguments, shown to the model (not enforced)."""
    strict: bool | None = None
    """Accepted; arguments are never constrained to the schema."""


class Tool(_Strict):
    type: Literal["function"]
    """Only function tools exist."""
    function: FunctionDefinition
    """The function offered."""


class NamedFunction(_Strict):
    name: str
    """The function that must be called."""


class NamedToolChoice(_Strict):
    type: Literal["function"]
    """Only function tools exist."""
    function: NamedFunction
    """The function that must be called."""


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    """The conversation so far, rendered through the tokenizer's chat template."""
    max_completion_tokens: int | None = Field(default=None, ge=1)
    """OpenAI's newer name for ``max_tokens``."""
    logprobs: bool = False
    """Return the chosen tokens' log-probabilities."""
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    """With ``logprobs``: this many alternatives per token."""
    tools: list[Tool] | None = None
    """Functions the model may call."""
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    """``auto`` (the default with tools), ``none``, ``required`` or one named function."""
    parallel_tool_calls: bool = True
    """False: only the first call of a reply is returned."""


def completion_logprobs(c: "Completion") -> dict[str, Any] | None:
    if c.logprobs is None:
        return None
    offsets, at = [], 0
    for item in c.logprobs:
        offsets.append(at)
        at += len(item.token)
    return {"tokens": [i.token for i in c.logprobs],
            "token_logprobs": [i.logprob for i in c.logprobs],
            "top_logprobs": [dict(i.top) for i in c.logprobs], "text_offset": offsets}


def chat_logprobs(c: "Completion") -> dict[str, Any] | None:
    if c.logprobs is None:
        return None
    return {"content": [
        {"token": i.token, "logprob": i.logprob, "bytes": list(i.token.encode()),
         "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in i.top]}
        for i in c.logprobs]}


def usage(prompts: list[list[int]], results: "list[list[Completion]]") -> dict[str, int]:
    prompt_tokens = sum(len(p) for p in prompts)
    completion = sum(len(c.token_ids) for group in results for c in group)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion}


def error_body(message: str, kind: str, param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object (vLLM answers the same shape)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def dumps(content: dict[str, Any]) -> bytes:
    return json.dumps(content, ensure_ascii=False).encode()
