"""The model server's HTTP API: OpenAI's ``/v1/completions``, ``/v1/chat/completions`` and
``/v1/models``, plus ``/health`` and ``/v1/stats`` (batching counters).

Every request goes through the batch engine (:mod:`vtbench.models.batching`), streamed or
not (:mod:`vtbench.models.streaming`); chat prompts are the tokenizer's chat template,
with tools where asked (:mod:`vtbench.models.tools`). A request may name the served model
(its id in ``/v1/models``, the checkpoint folder's name), ``candidate`` (the name the
tasks' harnesses send) or no model; any other name is a 404. Every error leaves as an
OpenAI error object: 400 for the caller's mistake, 404 for an unknown model or route, 413
for a body beyond :func:`~vtbench.models.wire.max_request_bytes`, 500 only for a fault of
the server. Every size and number a request carries is bounded before any work starts, so
no request can make the server die: a harness that could would make its own validation
fail, and a server's death is the candidate's failure.
"""

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from vtbench.models import wire
from vtbench.models.streaming import ChatChunks, CompletionChunks, EventStream
from vtbench.models.tools import (
    ToolUse,
    assistant_message,
    chat_text,
    has_tool_turns,
    template_renders_tools,
    tool_use,
)
from vtbench.models.wire import (
    BadRequest,
    BodyTooLarge,
    ChatRequest,
    CompletionRequest,
    ModelNotFound,
)

if TYPE_CHECKING:
    from fastapi import FastAPI, Request

    from vtbench.models.batching import BatchEngine, Completion, GenerationRequest

_Body = TypeVar("_Body", CompletionRequest, ChatRequest)


class Service:
    """Turns validated requests into engine requests and engine completions into answers."""

    def __init__(self, engine: "BatchEngine", name: str, context: int,
                 port: int | None = None) -> None:
        self.engine, self.name, self.context, self.port = engine, name, context, port
        self.tokenizer, self.codec = engine.tokenizer, engine.codec
        self._renders_tools: bool | None = None

    def check_model(self, model: str | None) -> None:
        if model and model not in (self.name, wire.HARNESS_MODEL_NAME):
            raise ModelNotFound(f"The model `{model}` does not exist: this server serves "
                                f"`{self.name}` (also called `{wire.HARNESS_MODEL_NAME}`)")

    def envelope(self, prefix: str, model: str | None) -> dict[str, Any]:
        return {"id": f"{prefix}-{uuid.uuid4().hex}", "created": int(time.time()),
                "model": model or self.name}

    def engine_request(self, body: CompletionRequest | ChatRequest, prompt_ids: list[int],
                       default_max: int | None, logprobs: int | None) -> "GenerationRequest":
        from vtbench.models.batching import GenerationRequest

        room = self.context - len(prompt_ids)
        if not prompt_ids:
            raise BadRequest("the prompt encodes to no tokens", "prompt")
        max_tokens = body.max_tokens or default_max or room
        if max_tokens > room or room < 1:
            raise BadRequest(f"prompt has {len(prompt_ids)} tokens; with max_tokens={max_tokens}"
                             f" it exceeds the model's context of {self.context}", "max_tokens")
        stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
        return GenerationRequest(prompt_ids, max_tokens, body.n, body.temperature, body.top_p,
                                 body.seed, stop, body.ignore_eos, logprobs)

    async def complete(self, requests: "list[GenerationRequest]") -> "list[list[Completion]]":
        futures = [asyncio.wrap_future(self.engine.submit(r)) for r in requests]
        return list(await asyncio.gather(*futures))

    def chat_prompt(self, body: ChatRequest, use: ToolUse | None) -> list[int]:
        """The chat template's prompt (see :func:`~vtbench.models.tools.chat_text`)."""
        native = (use is not None or has_tool_turns(body.messages)) and self.renders_tools()
        rendered = chat_text(self.tokenizer, body.messages, use, native)
        bos = self.tokenizer.bos_token
        # Templates that write the BOS token themselves must not get a second one.
        special = not (bos and rendered.startswith(bos))
        return self.codec.encode(rendered, special)

    def renders_tools(self) -> bool:
        if self._renders_tools is None:
            self._renders_tools = template_renders_tools(self.tokenizer)
        return self._renders_tools


async def completions(service: Service, body: CompletionRequest) -> Any:
    texts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
    if not texts:
        raise BadRequest("prompt must not be empty", "prompt")
    if len(texts) * body.n > wire.MAX_ROWS_PER_REQUEST:
        raise BadRequest(f"{len(texts)} prompts × n={body.n} exceed the "
                         f"{wire.MAX_ROWS_PER_REQUEST} rows one request may ask for", "prompt")
    prompts = [service.codec.encode(t) for t in texts]
    requests = [service.engine_request(body, p, 16, body.logprobs) for p in prompts]
    envelope = service.envelope("cmpl", body.model)
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        jobs = [(r, i * body.n) for i, r in enumerate(requests)]
        return EventStream(service.engine, jobs, CompletionChunks(), envelope,
                           per_step=body.logprobs is None,
                           usage_of=prompts if include_usage else None).response()
    results = await service.complete(requests)
    choices = [{"index": i * body.n + j, "text": c.text, "finish_reason": c.finish_reason,
                "logprobs": wire.completion_logprobs(c)}
               for i, group in enumerate(results) for j, c in enumerate(group)]
    return _json({**envelope, "object": "text_completion", "choices": choices,
                  "usage": wire.usage(prompts, results)})


async def chat(service: Service, body: ChatRequest) -> Any:
    use = tool_use(body)
    prompt = service.chat_prompt(body, use)
    if body.max_completion_tokens and not body.max_tokens:
        body.max_tokens = body.max_completion_tokens
    top = (body.top_logprobs or 0) if body.logprobs else None
    request = service.engine_request(body, prompt, None, top)
    envelope = service.envelope("chatcmpl", body.model)
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        whole = top is not None or (use is not None and use.reads_calls)
        return EventStream(service.engine, [(request, 0)], ChatChunks(use), envelope,
                           per_step=not whole,
                           usage_of=[prompt] if include_usage else None).response()
    results = await service.complete([request])
    choices = []
    for j, c in enumerate(results[0]):
        message, reason = assistant_message(c, use)
        choices.append({"index": j, "message": message, "finish_reason": reason,
                        "logprobs": wire.chat_logprobs(c)})
    return _json({**envelope, "object": "chat.completion", "choices": choices,
                  "usage": wire.usage([prompt], results)})


async def _bounded_body(request: "Request", context: int) -> bytes:
    """The body, read no further than :func:`~vtbench.models.wire.max_request_bytes`."""
    limit = wire.max_request_bytes(context)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"the request body of {declared} bytes exceeds this server's "
                           f"limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the request body exceeds this server's limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(model: type[_Body], raw: bytes) -> _Body:
    from fastapi.exceptions import RequestValidationError

    try:
        return model.model_validate_json(raw)
    except ValidationError as err:
        raise RequestValidationError(err.errors(include_url=False)) from None


def _json(content: dict[str, Any]) -> Any:
    from starlette.responses import Response

    return Response(wire.dumps(content), media_type="application/json")


def _error(status: int, message: str, kind: str, param: str | None = None,
           code: str | None = None) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(wire.error_body(message, kind, param, code), status_code=status)


def _service(request: "Request") -> Service:
    service: Service = request.app.state.service
    return service


def _model_card(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "vtbench"}


def create_app() -> "FastAPI":
    """The FastAPI app over the :class:`Service` in its ``state.service`` (set before it
    serves)."""
    from fastapi import FastAPI, Request

    app = FastAPI(title="vtbench model server", docs_url=None, redoc_url=None)
    _add_error_handlers(app)

    @app.get("/health")
    async def health(request: Request) -> Any:
        service = _service(request)
        if not service.engine.alive:
            return _error(503, "generation worker has stopped", "server_error")
        return {"status": "ok", "model": service.name, "port": service.port}

    @app.get("/v1/models")
    async def models(request: Request) -> Any:
        return {"object": "list", "data": [_model_card(_service(request).name)]}

    @app.get("/v1/models/{model:path}")
    async def model(request: Request, model: str) -> Any:
        service = _service(request)
        service.check_model(model)
        return _model_card(service.name)

    @app.get("/v1/stats")
    async def stats(request: Request) -> Any:
        return vars(_service(request).engine.stats)

    # Bodies are parsed and answers serialised directly (no FastAPI encoder): at tiny-model
    # speeds per-request overhead is a visible share of throughput.
    @app.post("/v1/completions")
    async def completions_route(request: Request) -> Any:
        service = _service(request)
        body = _parse(CompletionRequest, await _bounded_body(request, service.context))
        service.check_model(body.model)
        return await completions(service, body)

    @app.post("/v1/chat/completions")
    async def chat_route(request: Request) -> Any:
        service = _service(request)
        body = _parse(ChatRequest, await _bounded_body(request, service.context))
        service.check_model(body.model)
        return await chat(service, body)

    return app


def _add_error_handlers(app: "FastAPI") -> None:
    """Every exception → status mapping of the API, in one place."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> Any:
        first = err.errors()[0] if err.errors() else {"msg": "invalid request", "loc": ()}
        param = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
        return _error(400, f"{param or 'body'}: {first['msg']}", "invalid_request_error", param)

    @app.exception_handler(BadRequest)
    async def bad(_: Request, err: BadRequest) -> Any:
        return _error(400, str(err), "invalid_request_error", err.param)

    @app.exception_handler(BodyTooLarge)
    async def too_large(_: Request, err: BodyTooLarge) -> Any:
        return _error(413, str(err), "invalid_request_error", "body")

    @app.exception_handler(ModelNotFound)
    async def unknown_model(_: Request, err: ModelNotFound) -> Any:
        return _error(404, str(err), "invalid_request_error", "model", "model_not_found")

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, err: HTTPException) -> Any:
        return _error(err.status_code, str(err.detail), "invalid_request_error")

    @app.exception_handler(Exception)
    async def crash(_: Request, err: Exception) -> Any:
        return _error(500, f"internal error: {type(err).__name__}: {err}", "server_error")
