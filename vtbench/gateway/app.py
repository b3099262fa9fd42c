"""The gateway as an ASGI app: one route per wire API, plus ``HEAD /`` for CLI probes.

The dialects' routes are the allow-list. Any other route (batches, file uploads, polls and
cancels of background responses, legacy completions, embeddings, model lists) is refused
with the provider's own 404 body saying why, so the agent's CLI prints it; it reaches no
upstream. Those are work the gateway could not meter when its exchange ends.

The proxy routes are plain ASGI endpoints rather than request/response handlers so that a
stream is relayed event by event and is read to its end even when the agent hangs up.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vtbench.gateway.config import EpisodeGateway, GatewayConfig
from vtbench.gateway.dialects import DIALECTS, Dialect, not_served
from vtbench.gateway.proxy import Gateway


class _Endpoint:
    """ASGI endpoint for one dialect (starlette calls non-function endpoints as ASGI apps)."""

    def __init__(self, gateway: Gateway, dialect: Dialect) -> None:
        self.gateway = gateway
        self.dialect = dialect

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.gateway.handle(self.dialect, scope, receive, send)


async def _root(request: Request) -> Response:
    return JSONResponse({"service": "vtbench-gateway"})


async def _not_served(request: Request) -> Response:
    status, body = not_served(request.method, request.url.path, dict(request.headers))
    return JSONResponse(body, status)


def create_app(config: GatewayConfig, episode: EpisodeGateway) -> Starlette:
    """The app for one episode; its ledger and log open at startup, close at shutdown."""
    gateway = Gateway(config, episode)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.start()
        try:
            yield
        finally:
            await gateway.stop()

    routes = [Route("/", _root, methods=["GET", "HEAD"])]
    routes += [Route(d.path, _Endpoint(gateway, d), methods=["POST"]) for d in DIALECTS]
    routes.append(Route("/{rest:path}", _not_served,
                        methods=["GET", "POST", "PUT", "PATCH", "DELETE"]))
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.gateway = gateway
    return app
