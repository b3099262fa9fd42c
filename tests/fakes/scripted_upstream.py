"""A scripted LLM provider on a real socket, speaking the real wire protocols.

Stands in for the one thing that cannot exist here: a paid LLM API. It answers Anthropic
Messages (``/v1/messages``, ``?beta=true`` too), OpenAI Chat Completions, OpenAI Responses and
the Gemini API (``/v1beta/models/<model>:generateContent``, ``:streamGenerateContent`` with
``alt=sse`` or as a JSON array, ``:countTokens``), streaming (real SSE) or not, playing a
script of :class:`Reply` turns. The next turn is the number of tool results already in the
request (``tool_result`` blocks, ``role: tool`` messages, ``function_call_output`` items,
``functionResponse`` parts), as a real agent loop advances; ``pick="sequence"``
plays turns in arrival order instead. Every request is recorded with its headers. When the
script runs out it fails loudly: HTTP 500 naming the problem, an entry in ``errors``, and
the pytest fixture fails the test at teardown unless the test took the errors.

Use: ``ScriptedUpstream()`` as a context manager, or the ``scripted_upstream`` fixture (import
it into a conftest.py). It listens on a unix socket (``socket_path``) and on loopback TCP
(``base_url``) at once.
"""

import asyncio
import json
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes import wire
from tests.fakes.wire import Reply, call, fail, say

__all__ = ["RecordedRequest", "Reply", "ScriptedUpstream", "call", "fail", "say",
           "scripted_upstream"]

Api = Literal["anthropic", "chat", "responses", "count_tokens", "gemini",
              "gemini_count_tokens"]
_PATHS: dict[str, Api] = {"/v1/messages": "anthropic", "/v1/chat/completions": "chat",
                          "/v1/responses": "responses",
                          "/v1/messages/count_tokens": "count_tokens"}
_GEMINI = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):(?P<method>"
                     r"generateContent|streamGenerateContent|countTokens)$")


def route(path: str) -> tuple[Api | None, str | None]:
    """The API a path speaks and, for Gemini, the model the path names."""
    match = _GEMINI.match(path)
    if match is None:
        return _PATHS.get(path), None
    method = match["method"]
    return ("gemini_count_tokens" if method == "countTokens" else "gemini"), match["model"]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    """Lower-case names; the last value of a repeated header."""
    body: Any
    api: str
    step: int | None
    """Script index answered, or None (unscripted route)."""


def _provider(api: str) -> str:
    if api.startswith("gemini"):
        return "gemini"
    return "anthropic" if api in ("anthropic", "count_tokens") else "openai"


def tool_results(api: Api, body: dict[str, Any]) -> int:
    """How many tool results the agent has sent back so far."""
    if api == "anthropic":
        return sum(1 for message in body.get("messages") or []
                   if isinstance(message.get("content"), list)
                   for block in message["content"]
                   if isinstance(block, dict) and block.get("type") == "tool_result")
    if api == "chat":
        return sum(1 for message in body.get("messages") or [] if message.get("role") == "tool")
    if api == "gemini":
        return sum(1 for content in body.get("contents") or [] if isinstance(content, dict)
                   for part in content.get("parts") or []
                   if isinstance(part, dict) and "functionResponse" in part)
    items = body.get("input")
    return sum(1 for item in items if isinstance(item, dict)
               and item.get("type") == "function_call_output") if isinstance(items, list) else 0


class ScriptedUpstream:
    def __init__(self, script: list[Reply] | None = None,
                 pick: Literal["tool_results", "sequence"] = "tool_results",
                 socket_path: Path | None = None) -> None:
        self.script = list(script or [])
        self.pick = pick
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self.gate = threading.Event()
        """Paused streams continue once this is set."""
        self._lock = threading.Lock()
        self._served = 0
        self._dir = Path(tempfile.mkdtemp(prefix="vtb-up-", dir="/tmp"))
        self._dir.chmod(0o755)  # a sandboxed agent's uid may need to reach the socket
        self.socket_path = socket_path or self._dir / "upstream.sock"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def play(self, *replies: Reply, pick: Literal["tool_results", "sequence"] | None = None
             ) -> "ScriptedUpstream":
        """Replace the script (and forget earlier requests' position in it)."""
        with self._lock:
            self.script = list(replies)
            self._served = 0
            if pick is not None:
                self.pick = pick
        return self

    def take_errors(self) -> list[str]:
        with self._lock:
            errors, self.errors = self.errors, []
        return errors

    # --- HTTP ---------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        api, path_model = route(request.url.path)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if api is None or not isinstance(body, dict):
            message = f"unscripted request {request.method} {request.url.path}"
            return self._refuse(request, body, message)
        if api in ("count_tokens", "gemini_count_tokens"):
            self._record(request, body, api, None)
            return JSONResponse({"input_tokens": 42} if api == "count_tokens"
                                else {"totalTokens": 42})
        step = self._next_step(api, body)
        self._record(request, body, api, step)
        if step >= len(self.script):
            return self._fail_loudly(api, step)
        if api == "gemini":
            assert path_model is not None
            streaming = request.url.path.endswith(":streamGenerateContent")
            sse = request.query_params.get("alt") == "sse"
            return await self._answer_gemini(path_model, streaming, sse, self.script[step])
        return await self._answer(api, body, self.script[step])

    def _next_step(self, api: Api, body: dict[str, Any]) -> int:
        with self._lock:
            self._served += 1
            return self._served - 1 if self.pick == "sequence" else tool_results(api, body)

    def _record(self, request: Request, body: Any, api: str, step: int | None) -> None:
        recorded = RecordedRequest(
            request.method, request.url.path, request.url.query,
            {k.lower(): v for k, v in request.headers.items()}, body, api, step)
        with self._lock:
            self.requests.append(recorded)

    def _refuse(self, request: Request, body: Any, message: str) -> Response:
        self._record(request, body, "unknown", None)
        with self._lock:
            self.errors.append(message)
        return JSONResponse({"error": {"message": message, "type": "scripted_upstream"}}, 404)

    def _fail_loudly(self, api: Api, step: int) -> Response:
        message = (f"scripted upstream: script exhausted: request needs step {step} but the "
                   f"script has {len(self.script)} replies ({api})")
        with self._lock:
            self.errors.append(message)
        return JSONResponse(wire.error_body(_provider(api), 500, message), 500)

    async def _answer(self, api: Api, body: dict[str, Any], reply: Reply) -> Response:
        model = str(body.get("model") or "scripted-model")
        provider = "anthropic" if api == "anthropic" else "openai"
        if reply.status != 200:
            return JSONResponse(wire.error_body(provider, reply.status, reply.error_message),
                                reply.status)
        if body.get("stream") is not True:
            whole = {"anthropic": wire.anthropic_message, "chat": wire.chat_completion,
                     "responses": wire.responses_body}[api](reply, model)
            return JSONResponse(whole)
        if api == "anthropic":
            events = wire.anthropic_events(reply, model)
        elif api == "chat":
            options = body.get("stream_options") or {}
            events = wire.chat_chunks(reply, model, options.get("include_usage") is True)
        else:
            events = wire.responses_events(reply, model)
        return StreamingResponse(self._stream(events, reply.pause),
                                 media_type="text/event-stream")

    async def _answer_gemini(self, model: str, streaming: bool, sse: bool, reply: Reply
                             ) -> Response:
        if reply.status != 200:
            return JSONResponse(wire.error_body("gemini", reply.status, reply.error_message),
                                reply.status)
        if not streaming:
            return JSONResponse(wire.gemini_response(reply, model))
        if not sse:  # without alt=sse Google streams one JSON array of the same chunks
            return Response(json.dumps(wire.gemini_chunks(reply, model)),
                            media_type="application/json")
        return StreamingResponse(self._stream(wire.gemini_events(reply, model), reply.pause),
                                 media_type="text/event-stream")

    async def _stream(self, events: list[bytes], pause: bool) -> AsyncIterator[bytes]:
        for index, event in enumerate(events):
            if pause and index == 2:
                released = await asyncio.to_thread(self.gate.wait, 30)
                if not released:
                    with self._lock:
                        self.errors.append("scripted upstream: paused stream never released")
                    return
            yield event

    async def _root(self, request: Request) -> Response:
        return Response(status_code=404)

    def app(self) -> Starlette:
        methods = ["POST"]
        routes = [Route("/", self._root, methods=["GET", "HEAD"])]
        routes += [Route(path, self._handle, methods=methods) for path in _PATHS]
        routes.append(Route("/{rest:path}", self._handle, methods=["GET", "POST", "PUT"]))
        return Starlette(routes=routes)

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> "ScriptedUpstream":
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o666)
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("127.0.0.1", 0))
        self.port = tcp.getsockname()[1]
        config = uvicorn.Config(self.app(), lifespan="off", access_log=False,
                                log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [unix, tcp]},
                                        name="scripted-upstream", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("scripted upstream did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.gate.set()
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=15)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "ScriptedUpstream":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def scripted_upstream() -> Iterator[ScriptedUpstream]:
    """A started upstream with an empty script; unexpected errors fail the test at teardown."""
    with ScriptedUpstream() as upstream:
        yield upstream
        errors = upstream.take_errors()
    if errors:
        pytest.fail("scripted upstream recorded errors: " + "; ".join(errors))


def main() -> None:
    """Serve one reply forever (benchmarks, manual runs): ``--socket PATH --text TEXT``."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--text", default="ok")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with ScriptedUpstream([say(args.text)], socket_path=args.socket) as upstream:
        print(f"scripted upstream on {upstream.socket_path} and {upstream.base_url}", flush=True)
        stop.wait()


if __name__ == "__main__":
    main()
