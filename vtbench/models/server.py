"""The OpenAI-compatible model server for a local HF causal-LM checkpoint.

``python -m vtbench.models.server --model DIR --socket PATH``: FastAPI on a unix socket
(optionally also TCP on 127.0.0.1) with ``/v1/completions``, ``/v1/chat/completions``,
``/v1/models``, ``/health`` and ``/v1/stats`` (batching counters). Concurrent requests are
batched by :class:`~vtbench.models.batching.BatchEngine`. Errors are OpenAI error objects
(400 for a bad request, never a 500 for the caller's mistake). It is trusted code serving
untrusted weights: the checkpoint is loaded only through
:func:`~vtbench.models.checkpoint.load_checkpoint` (safetensors, no remote code). Other
code starts it through :mod:`vtbench.models.serving` (``serve_model``).

Sampling follows the OpenAI defaults (``temperature`` 1, ``top_p`` 1, ``max_tokens`` 16
for completions, the rest of the context for chat); ``temperature`` 0 is greedy and gives
the tokens of a direct greedy ``generate``. Beyond OpenAI, ``ignore_eos`` (as in vLLM) is
accepted. Streaming, ``echo``, penalties and token-id prompts are refused with a 400.
"""

import argparse
import asyncio
import contextlib
import errno
import functools
import json
import os
import select
import shutil
import signal
import socket
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vtbench.errors import CheckpointError, VtbenchError

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI, Request

    from vtbench.models.batching import BatchEngine, Completion, GenerationRequest

CHECKPOINT_EXIT_CODE = 3
DEFAULT_HEADROOM_BYTES = 2 << 30
WEIGHT_FACTOR = 4
MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to 108 bytes


# ---------------------------------------------------------------- wire format (requests)

class _Sampling(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = ""
    """Accepted and echoed; the server serves one model whatever the name."""
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=128)
    stop: str | list[str] | None = None
    seed: int | None = None
    ignore_eos: bool = False
    """Generate exactly ``max_tokens`` tokens (vLLM's extension)."""
    stream: Literal[False] = False
    presence_penalty: Literal[0] = 0
    frequency_penalty: Literal[0] = 0
    user: str | None = None


class CompletionRequest(_Sampling):
    prompt: str | list[str]
    logprobs: int | None = Field(default=None, ge=0, le=20)
    echo: Literal[False] = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str
    content: str | list[dict[str, str]] | None = None
    name: str | None = None


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)


_Body = TypeVar("_Body", bound=_Sampling)


class BadRequest(ValueError):
    """The caller's mistake that pydantic cannot see (too long a prompt, a bad template)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


# ---------------------------------------------------------------- the app

class _Service:
    """Turns validated requests into engine requests and engine completions into responses."""

    def __init__(self, engine: "BatchEngine", name: str, context: int,
                 port: int | None = None) -> None:
        self.engine, self.name, self.context, self.port = engine, name, context, port
        self.tokenizer, self.codec = engine.tokenizer, engine.codec

    def engine_request(self, body: _Sampling, prompt_ids: list[int], default_max: int | None,
                       logprobs: int | None) -> "GenerationRequest":
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

    def chat_prompt(self, body: ChatRequest) -> list[int]:
        messages = [{"role": m.role, "content": _text(m.content)} for m in body.messages]
        try:
            rendered = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                          add_generation_prompt=True)
        except Exception as err:  # a template may raise anything (jinja, missing template)
            raise BadRequest(f"cannot apply the chat template: {err}", "messages") from err
        bos = self.tokenizer.bos_token
        # Templates that write the BOS token themselves must not get a second one.
        special = not (bos and rendered.startswith(bos))
        return self.codec.encode(rendered, special)

    def usage(self, prompts: list[list[int]], results: "list[list[Completion]]") -> dict[str, int]:
        prompt_tokens = sum(len(p) for p in prompts)
        completion = sum(len(c.token_ids) for group in results for c in group)
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion}


def _text(content: str | list[dict[str, str]] | None) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return content or ""


def _completion_logprobs(c: "Completion") -> dict[str, Any] | None:
    if c.logprobs is None:
        return None
    offsets, at = [], 0
    for item in c.logprobs:
        offsets.append(at)
        at += len(item.token)
    return {"tokens": [i.token for i in c.logprobs],
            "token_logprobs": [i.logprob for i in c.logprobs],
            "top_logprobs": [dict(i.top) for i in c.logprobs], "text_offset": offsets}


def _chat_logprobs(c: "Completion") -> dict[str, Any] | None:
    if c.logprobs is None:
        return None
    return {"content": [
        {"token": i.token, "logprob": i.logprob, "bytes": list(i.token.encode()),
         "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in i.top]}
        for i in c.logprobs]}


def _parse(model: type[_Body], raw: bytes) -> _Body:
    from fastapi.exceptions import RequestValidationError

    try:
        return model.model_validate_json(raw)
    except ValidationError as err:
        raise RequestValidationError(err.errors(include_url=False)) from None


def _json(content: dict[str, Any]) -> Any:
    from starlette.responses import Response

    return Response(json.dumps(content, ensure_ascii=False).encode(),
                    media_type="application/json")


def _error(status: int, message: str, kind: str, param: str | None = None) -> Any:
    from fastapi.responses import JSONResponse

    body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return JSONResponse(body, status_code=status)


def _service(request: "Request") -> _Service:
    service: _Service = request.app.state.service
    return service


def create_app() -> "FastAPI":
    """The FastAPI app over the :class:`_Service` in its ``state.service`` (set before it
    serves); every error leaves as an OpenAI error object."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    app = FastAPI(title="vtbench model server", docs_url=None, redoc_url=None)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> Any:
        first = err.errors()[0] if err.errors() else {"msg": "invalid request", "loc": ()}
        param = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
        return _error(400, f"{param or 'body'}: {first['msg']}", "invalid_request_error", param)

    @app.exception_handler(BadRequest)
    async def bad(_: Request, err: BadRequest) -> Any:
        return _error(400, str(err), "invalid_request_error", err.param)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, err: HTTPException) -> Any:
        return _error(err.status_code, str(err.detail), "invalid_request_error")

    @app.exception_handler(Exception)
    async def crash(_: Request, err: Exception) -> Any:
        return _error(500, f"internal error: {type(err).__name__}: {err}", "server_error")

    @app.get("/health")
    async def health(request: Request) -> Any:
        service = _service(request)
        if not service.engine.alive:
            return _error(503, "generation worker has stopped", "server_error")
        return {"status": "ok", "model": service.name, "port": service.port}

    @app.get("/v1/models")
    async def models(request: Request) -> Any:
        return {"object": "list", "data": [{"id": _service(request).name, "object": "model",
                                            "created": 0, "owned_by": "vtbench"}]}

    @app.get("/v1/stats")
    async def stats(request: Request) -> Any:
        return vars(_service(request).engine.stats)

    # Bodies are parsed and answers serialised directly (no FastAPI encoder): at tiny-model
    # speeds per-request overhead is a visible share of throughput.
    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        service = _service(request)
        body = _parse(CompletionRequest, await request.body())
        texts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
        if not texts:
            raise BadRequest("prompt must not be empty", "prompt")
        prompts = [service.codec.encode(t) for t in texts]
        requests = [service.engine_request(body, p, 16, body.logprobs) for p in prompts]
        results = await service.complete(requests)
        choices = [{"index": i * body.n + j, "text": c.text, "finish_reason": c.finish_reason,
                    "logprobs": _completion_logprobs(c)}
                   for i, group in enumerate(results) for j, c in enumerate(group)]
        return _json({"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
                      "created": int(time.time()), "model": body.model or service.name,
                      "choices": choices, "usage": service.usage(prompts, results)})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        service = _service(request)
        body = _parse(ChatRequest, await request.body())
        prompt = service.chat_prompt(body)
        if body.max_completion_tokens and not body.max_tokens:
            body.max_tokens = body.max_completion_tokens
        top = (body.top_logprobs or 0) if body.logprobs else None
        results = await service.complete([service.engine_request(body, prompt, None, top)])
        choices = [{"index": j, "message": {"role": "assistant", "content": c.text},
                    "finish_reason": c.finish_reason, "logprobs": _chat_logprobs(c)}
                   for j, c in enumerate(results[0])]
        return _json({"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
                      "created": int(time.time()), "model": body.model or service.name,
                      "choices": choices, "usage": service.usage([prompt], results)})

    return app


@functools.cache
def server_config() -> "uvicorn.Config":
    """uvicorn's loaded config over :func:`create_app`, built once per process: the
    template (:mod:`vtbench.models.template`) builds it before it forks the servers."""
    import uvicorn

    # No lifespan: the app has no startup or shutdown work, and FastAPI's would import and
    # configure its telemetry in every server.
    config = uvicorn.Config(create_app(), log_level="warning", access_log=False, lifespan="off",
                            timeout_keep_alive=30, timeout_graceful_shutdown=10)
    config.load()
    return config


# ---------------------------------------------------------------- the server process

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vtbench.models.server",
                                     description="OpenAI-compatible server for a checkpoint")
    parser.add_argument("--model", type=Path, required=True, help="checkpoint directory")
    parser.add_argument("--socket", type=Path, required=True, help="unix socket to listen on")
    parser.add_argument("--port", type=int, help="also listen on 127.0.0.1:PORT (0: any)")
    parser.add_argument("--max-batch", type=int, default=None,
                        help="rows per generate call (default: 64 on a CPU, 256 on a GPU)")
    parser.add_argument("--window-ms", type=float, default=100.0,
                        help="longest wait for a batch to fill")
    parser.add_argument("--gap-ms", type=float, default=5.0,
                        help="stop collecting once no request arrived for this long")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--memory-headroom-mb", type=int, default=None,
                        help="CPU only: address space allowed beyond what the server holds "
                             "before loading (default: 2048 + 4 x the weight files)")
    parser.add_argument("--exit-with", type=int, metavar="PID",
                        help="exit as soon as process PID exits")
    parser.add_argument("--own-folder", type=Path,
                        help="the socket's private folder: removed if --exit-with's process "
                             "exits first (it can no longer remove it)")
    return parser


def _listen(socket_path: Path, port: int | None) -> list[socket.socket]:
    socket_path.unlink(missing_ok=True)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(socket_path))
    # Who may connect is decided by the directory holding the socket.
    os.chmod(socket_path, 0o666)
    sockets = [unix]
    if port is not None:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", port))
        sockets.append(tcp)
    return sockets


def _exit_with(owner: int, own_folder: Path | None = None) -> None:
    """SIGTERM this process as soon as process ``owner`` exits (watched through a pidfd,
    so it works whether or not ``owner`` is the parent), removing ``own_folder`` first."""

    def orphaned() -> None:
        if own_folder is not None:
            shutil.rmtree(own_folder, ignore_errors=True)
        os.kill(os.getpid(), signal.SIGTERM)

    try:
        pidfd = os.pidfd_open(owner)
    except ProcessLookupError:
        orphaned()
        return

    def watch() -> None:
        with contextlib.suppress(OSError):
            select.select([pidfd], [], [])
        orphaned()

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()


def default_max_batch(device: str) -> int:
    """Rows per ``generate`` call when none is asked for. A decoding step of a small model
    on a GPU is bound by its fixed per-step cost, so 256 rows cost little more than 64; on
    a CPU the cost grows with the rows, and 64 keeps each request's latency down."""
    return 256 if device.startswith("cuda") else 64


def run_server(args: argparse.Namespace) -> None:
    """Load the checkpoint, then serve until SIGTERM/SIGINT."""
    import torch
    import uvicorn
    from transformers.utils import logging as hf_logging

    from vtbench.models.batching import BatchEngine
    if args.exit_with:
        _exit_with(args.exit_with, args.own_folder)
    torch.set_num_threads(args.threads)
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if not device.startswith("cuda"):
        cap_address_space(args.model, args.memory_headroom_mb)
    model, tokenizer = load_within_limit(args.model, device)
    engine = BatchEngine(model, tokenizer, max_batch=args.max_batch or default_max_batch(device),
                         window_s=args.window_ms / 1000, gap_s=args.gap_ms / 1000)
    context = int(getattr(model.config, "max_position_embeddings", 0) or
                  getattr(tokenizer, "model_max_length", 2048))
    sockets = _listen(args.socket, args.port)
    port = sockets[1].getsockname()[1] if len(sockets) > 1 else None
    config = server_config()
    app = cast("FastAPI", config.app)
    app.state.service = _Service(engine, args.model.resolve().name, context, port)
    engine.start()
    try:
        uvicorn.Server(config).run(sockets=sockets)
    finally:
        engine.stop()
        args.socket.unlink(missing_ok=True)


def cap_address_space(model_dir: Path, headroom_mb: int | None) -> None:
    """Cap the server's address space (RLIMIT_AS) at what it holds now plus a headroom that
    grows with the candidate's weight files: a checkpoint that makes the loader allocate
    far beyond its own size then fails as the candidate's failure instead of growing the
    host's memory. CPU only: CUDA reserves address ranges far beyond what it uses."""
    import resource

    if headroom_mb is None:
        weights = sum(path.stat().st_size for path in model_dir.glob("*.safetensors"))
        headroom = DEFAULT_HEADROOM_BYTES + WEIGHT_FACTOR * weights
    else:
        headroom = headroom_mb << 20
    held = next(int(line.split()[1]) << 10 for line in
                Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (held + headroom, held + headroom))


def load_within_limit(model_dir: Path, device: str) -> tuple[Any, Any]:
    """Model and tokenizer; running out of the capped memory is the candidate's failure."""
    from vtbench.models.checkpoint import load_checkpoint, load_tokenizer

    try:
        return load_checkpoint(model_dir, device), load_tokenizer(model_dir)
    except CheckpointError:
        raise
    except (MemoryError, OSError, RuntimeError) as error:
        if not out_of_memory(error):
            raise
        raise CheckpointError("loading the checkpoint needs more memory than its weight "
                              "files justify") from error


def out_of_memory(error: BaseException) -> bool:
    if isinstance(error, MemoryError):
        return True
    if isinstance(error, OSError) and error.errno == errno.ENOMEM:
        return True
    text = str(error).lower()
    return "cannot allocate memory" in text or "can't allocate memory" in text


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        run_server(args)
    except CheckpointError as err:
        print(f"error: {err.one_line()}", file=sys.stderr, flush=True)
        return CHECKPOINT_EXIT_CODE
    except (VtbenchError, OSError) as err:
        message = err.one_line() if isinstance(err, VtbenchError) else str(err)
        print(f"error: {message}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
