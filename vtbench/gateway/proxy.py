"""The gateway's core: check the budget, forward with the real key, meter, log.

Trusted: the operator's config and environment (upstream URLs, real keys, prices), the
runner's episode settings (identity, budget), and the provider's usage fields (the
provider's own metering is the truth we bill by). Untrusted: everything the agent sends.
Its body is parsed only to read ``model``, ``stream``, what the budget prices (output
limits, answer counts) and switches for work that would end after its answer (Responses
``background``, refused), and is otherwise forwarded as is (except that Chat Completions
streams always ask for usage, and a written output limit); a Gemini route's model must be
a plain model name; its credential headers and credential query parameters (Google's
``key=``) are dropped; it cannot name another episode or change a budget. A stream the
agent abandons is still read to its end from the upstream so its usage is metered exactly.

Under a token or dollar budget each request reserves its worst case before it leaves
(its body's bytes as input, its output limit once per answer asked for, a limit the
gateway writes into a request that names none) and is refused unless that fits beside what
is spent and held by requests in flight; its reported usage replaces the reservation when
it ends, and an answer that reports none is charged the reservation (rules and their one
exception: :mod:`vtbench.gateway.budget`). Without a budget the body travels unchanged.
"""

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx

from vtbench.gateway.budget import BudgetKeeper, Demand, Reservation
from vtbench.gateway.config import PROVIDERS, EpisodeGateway, GatewayConfig, Provider, Upstream
from vtbench.gateway.dialects import Dialect, ErrorKind, Prepared, is_usage_only_chunk
from vtbench.gateway.store import State, UsageStore
from vtbench.gateway.streams import EventSplitter, event_data
from vtbench.gateway.trajectory import ExchangeRecord, Timings, TrajectoryLog
from vtbench.gateway.usage import Usage

Scope = dict[str, Any]
Message = dict[str, Any]
_HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
    "upgrade", "host", "content-length", "accept-encoding", "content-encoding",
}
_CREDENTIAL_MARKS = ("key", "auth", "cookie", "token", "secret", "openai-organization",
                     "openai-project")
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def agent_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """The agent's headers that may travel upstream: no hop-by-hop, no credentials."""
    kept = []
    for name_bytes, value in raw:
        name = name_bytes.decode("latin-1").lower()
        if name in _HOP_BY_HOP or any(mark in name for mark in _CREDENTIAL_MARKS):
            continue
        kept.append((name, value.decode("latin-1")))
    return kept


def agent_query(query: str) -> str:
    """The agent's query string without credential parameters (``key=``, ``access_token=``)."""
    pairs = parse_qsl(query, keep_blank_values=True)
    kept = [(name, value) for name, value in pairs
            if not any(mark in name.lower() for mark in _CREDENTIAL_MARKS)]
    return query if len(kept) == len(pairs) else urlencode(kept)


def upstream_url(base_url: str, path: str, query: str) -> str:
    """Join base and path; a version segment in both (``/v1``, ``/v1beta``) counts once."""
    base = base_url.rstrip("/")
    version = "/" + path.split("/")[1] if path.count("/") > 1 else None
    if version and base.endswith(version):
        path = path[len(version):]
    return f"{base}{path}" + (f"?{query}" if query else "")


def key_header(provider: Provider, key: str) -> tuple[str, str]:
    """The header carrying the real key, as each provider expects it."""
    if provider == "anthropic":
        return "x-api-key", key
    if provider == "gemini":
        return "x-goog-api-key", key
    return "authorization", f"Bearer {key}"


@dataclass
class _Exchange:
    """What one exchange has gathered so far, for the ledger row and the log line."""

    dialect: Dialect
    path: str
    query: str
    started_at: float = field(default_factory=time.time)
    t0: float = field(default_factory=time.perf_counter)
    id: int | None = None
    request: Any = None
    model: str | None = None
    stream: bool = False
    state: State = "error"
    http_status: int | None = None
    usage: Usage = field(default_factory=Usage)
    response: Any = None
    events: int = 0
    error: str | None = None
    reservation: Reservation = field(default_factory=Reservation)
    upstream_headers_ms: float | None = None
    first_event_ms: float | None = None
    finished: bool = False

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000


class Gateway:
    """One episode's gateway; :meth:`start` and :meth:`stop` bracket its serving."""

    def __init__(self, config: GatewayConfig, episode: EpisodeGateway) -> None:
        self.config = config
        self.episode = episode
        self._keys: dict[Provider, str | None] = {}
        for provider in PROVIDERS:
            upstream = config.upstream(provider)
            if upstream is not None:
                self._keys[provider] = upstream.resolve_key(provider)
        self._clients: dict[Provider, httpx.AsyncClient] = {}
        self.store: UsageStore | None = None
        self.log: TrajectoryLog | None = None
        # Running totals of this episode: loaded from the ledger at start, then kept in step
        # with every row this gateway opens and finishes (it is the only writer of its
        # episode's rows), so a budget check costs no query however long the episode runs.
        self.budget = BudgetKeeper(episode.budget, episode.episode_id,
                                   config.input_allowance_tokens, config.default_output_limit)

    async def start(self) -> None:
        self.store = UsageStore(self.episode.usage_db)
        self.store.recover(self.episode.episode_id)
        spent = self.store.totals(self.episode.episode_id)
        self.budget.spent_tokens = spent.tokens + spent.unsettled_tokens
        self.budget.spent_dollars = spent.dollars + spent.unsettled_dollars
        self.log = TrajectoryLog(self.episode.trajectory_path())
        for provider in self._keys:
            upstream = self.config.upstream(provider)
            assert upstream is not None
            self._clients[provider] = _client(upstream)

    async def stop(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
        if self.log is not None:
            self.log.close()
        if self.store is not None:
            self.store.close()

    async def handle(self, dialect: Dialect, scope: Scope, receive: Any, send: Any) -> None:
        ex = _Exchange(dialect, scope["path"], scope.get("query_string", b"").decode("latin-1"))
        try:
            await self._handle(ex, scope, receive, send)
        finally:
            self._finish(ex)

    async def _handle(self, ex: _Exchange, scope: Scope, receive: Any, send: Any) -> None:
        raw = await _read_body(receive, self.config.max_request_bytes)
        if raw is None:
            return await self._refuse(ex, send, "too_large", "request body too large")
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            return await self._refuse(ex, send, "bad_request", "request body is not a JSON object")
        ex.request = payload
        if ex.dialect.model_in_path:
            ex.model = str(scope.get("path_params", {}).get("model", ""))
            if not _MODEL_NAME.fullmatch(ex.model):
                return await self._refuse(ex, send, "bad_request", "not a model name")
        else:
            ex.model = payload["model"] if isinstance(payload.get("model"), str) else None
        deferred = ex.dialect.deferred(payload)
        if deferred is not None:
            return await self._refuse(ex, send, "bad_request", deferred)
        client = self._clients.get(ex.dialect.provider)
        if client is None:
            message = f"the gateway has no {ex.dialect.provider} upstream configured"
            return await self._refuse(ex, send, "not_configured", message)
        try:
            reservation = self._reserve(ex, raw, payload)
        except ValueError as err:
            return await self._refuse(ex, send, "bad_request", str(err))
        if isinstance(reservation, str):
            return await self._refuse(ex, send, "budget", reservation)
        if reservation.written_limit is not None:
            payload = ex.dialect.with_limit(payload, reservation.written_limit)
            raw = json.dumps(payload).encode()
        prepared = ex.dialect.prepare(raw, payload)
        ex.stream = prepared.stream
        assert self.store is not None
        ex.id = self.store.open(self.episode.episode_id, ex.dialect.name, ex.model,
                                reservation.tokens, reservation.dollars)
        ex.reservation = reservation
        self.budget.hold(reservation)
        await self._forward(ex, client, prepared, scope, send)

    def _reserve(self, ex: _Exchange, raw: bytes, payload: Message) -> Reservation | str:
        """The request's reservation or why the budget refuses it; no await may come between
        this and :meth:`BudgetKeeper.hold`, or two requests could claim the same room."""
        if not self.budget.limited:
            return Reservation()
        named = ex.dialect.named_limit(payload)
        return self.budget.reserve(Demand(len(raw), named, self.config.price(ex.model),
                                          ex.dialect.metered, ex.dialect.answer_count(payload)))

    async def _forward(
        self, ex: _Exchange, client: httpx.AsyncClient, prepared: Prepared, scope: Scope,
        send: Any,
    ) -> None:
        upstream = self.config.upstream(ex.dialect.provider)
        assert upstream is not None
        headers = agent_headers(scope["headers"])
        headers.append(("accept-encoding", "identity"))
        key = self._keys[ex.dialect.provider]
        if key is not None:
            headers.append(key_header(ex.dialect.provider, key))
        url = upstream_url(upstream.base_url, ex.path, agent_query(ex.query))
        request = client.build_request("POST", url, headers=headers, content=prepared.body)
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as err:
            ex.error = f"upstream unreachable: {type(err).__name__}: {err}"
            status, body = ex.dialect.error("unreachable", f"LLM upstream unreachable ({err})")
            ex.http_status, ex.response = status, body
            self._finish(ex)
            return await _send_json(send, status, body)
        ex.upstream_headers_ms = ex.elapsed_ms()
        ex.http_status = response.status_code
        try:
            is_sse = response.headers.get("content-type", "").startswith("text/event-stream")
            if response.is_success and is_sse:
                await self._relay_stream(ex, prepared, response, send)
            else:
                await self._relay_body(ex, response, send)
        finally:
            await response.aclose()

    async def _relay_stream(
        self, ex: _Exchange, prepared: Prepared, response: httpx.Response, send: Any
    ) -> None:
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": _response_headers(response)})
        watcher = ex.dialect.new_stream()
        splitter = EventSplitter()
        try:
            # Decoded bytes: the content-encoding header is not forwarded (see _HOP_BY_HOP).
            async for chunk in response.aiter_bytes():
                for event in splitter.feed(chunk):
                    data = event_data(event)
                    if data is not None:
                        watcher.feed(data)
                        if prepared.hide_usage_chunk and is_usage_only_chunk(data):
                            continue
                    await send({"type": "http.response.body", "body": event, "more_body": True})
                    ex.events += 1
                    if ex.first_event_ms is None:
                        ex.first_event_ms = ex.elapsed_ms()
            ex.state = "done"
        except httpx.HTTPError as err:
            ex.error = f"upstream stream broke: {type(err).__name__}: {err}"
        finally:
            ex.usage, ex.response = watcher.usage(), watcher.result()
        if ex.state == "done" and isinstance(ex.response, dict) and ex.response.get("error"):
            ex.state, ex.error = "error", "upstream sent an error event in the stream"
        # Metered and logged before the agent sees the end, so its next request is checked
        # against this one's usage.
        self._finish(ex)
        await send({"type": "http.response.body", "body": splitter.rest(), "more_body": False})

    async def _refuse(self, ex: _Exchange, send: Any, kind: ErrorKind, message: str) -> None:
        status, body = ex.dialect.error(kind, message)
        assert self.store is not None
        ex.id = self.store.refuse(self.episode.episode_id, ex.dialect.name, ex.model, status)
        ex.state, ex.http_status, ex.response, ex.error = "refused", status, body, message
        self._finish(ex)
        await _send_json(send, status, body)

    async def _relay_body(self, ex: _Exchange, response: httpx.Response, send: Any) -> None:
        """A whole answer: success bodies are metered, error bodies pass through untouched."""
        body = await response.aread()
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        ex.response = parsed
        answer = isinstance(parsed, dict) or (ex.dialect.array_body and isinstance(parsed, list))
        if response.is_success and answer:
            ex.usage, ex.state = ex.dialect.body_usage(parsed), "done"
        elif response.is_success:
            ex.error = "upstream answered a body that is not a JSON object"
        else:
            ex.error = f"upstream answered HTTP {response.status_code}"
        self._finish(ex)
        headers = [*_response_headers(response), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    def _finish(self, ex: _Exchange) -> None:
        """Write the ledger row and the log line, once."""
        if ex.id is None or ex.finished:
            return
        ex.finished = True
        assert self.store is not None and self.log is not None
        if _answered(ex.http_status) and not ex.usage.reported:
            # The provider answered without saying what it used: charge the worst case.
            ex.usage, dollars = ex.reservation.as_usage(), ex.reservation.dollars
        else:
            dollars = ex.usage.dollars(self.config.price(ex.model))
        if ex.state != "refused":
            self.store.finish(ex.id, ex.state, ex.http_status, ex.usage, dollars)
            self.budget.settle(ex.reservation, ex.usage.total, dollars)
        self.log.write(ExchangeRecord(
            episode=self.episode.episode_id, exchange=ex.id, api=ex.dialect.name, path=ex.path,
            query=ex.query, model=ex.model, stream=ex.stream, state=ex.state,
            http_status=ex.http_status, started_at=ex.started_at,
            timings=Timings(upstream_headers_ms=ex.upstream_headers_ms,
                            first_event_ms=ex.first_event_ms, total_ms=ex.elapsed_ms()),
            usage=ex.usage.as_dict(), dollars=dollars, usage_reported=ex.usage.reported,
            request=ex.request, response=ex.response, events=ex.events, error=ex.error))


def _answered(http_status: int | None) -> bool:
    """The upstream accepted the request (a provider bills no error answer)."""
    return http_status is not None and 200 <= http_status < 300


def _client(upstream: Upstream) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(uds=str(upstream.uds)) if upstream.uds else None
    return httpx.AsyncClient(
        transport=transport, trust_env=False,
        timeout=httpx.Timeout(upstream.timeout_s, connect=30.0),
        limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))


async def _read_body(receive: Any, limit: int) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        body = message.get("body", b"")
        size += len(body)
        if size > limit:
            return None
        chunks.append(body)
        if not message.get("more_body"):
            return b"".join(chunks)


def _response_headers(response: httpx.Response) -> list[tuple[bytes, bytes]]:
    return [(name.lower(), value) for name, value in response.headers.raw
            if name.decode("latin-1").lower() not in _HOP_BY_HOP]


async def _send_json(send: Any, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data, "more_body": False})
