"""The LLM gateway: a host-side proxy between a research agent and its LLM provider.

It speaks the Anthropic Messages API, the OpenAI Chat Completions and Responses APIs and
the Gemini API (generateContent, streamGenerateContent, countTokens) toward the agent
(streaming and not), forwards each request to the operator's upstream with the real API
key (the key never enters the sandbox; any key the agent sends, in a header or in the
query, is dropped), meters input, cache and output tokens and dollars per episode in a
SQLite (WAL) ledger, refuses a request whose worst case does not fit in the episode's
token or dollar budget beside the requests in flight (before contacting the upstream, in
the provider's own error shape; :mod:`vtbench.gateway.budget`), refuses work it could not
meter when its exchange ends (batches, file uploads, background responses, any route off its
allow-list), and logs every exchange as the research agent's trajectory (JSONL).

Episode identity is the unix socket: each episode gets its own gateway app on its own
socket path, bound into that episode's sandbox only, so no token exists inside the
sandbox to steal or forge (whoever can connect to the socket is that episode; the runner
must bind it into no other sandbox). TCP on loopback is offered for agents run outside a
sandbox; it carries the same trust as the socket, so it is for development only.

Trusted: the operator's config file and environment (upstream URLs, real keys, prices),
the runner's episode settings (identity, budget, ledger and log paths), and the
provider's usage fields, which are what the gateway bills by. Not trusted: anything the
agent sends (bodies are forwarded, not believed; credential headers are dropped; no
request can name another episode or change a budget). Details: :mod:`vtbench.gateway.proxy`.
"""

from vtbench.gateway.app import create_app
from vtbench.gateway.budget import BUDGET_MESSAGE
from vtbench.gateway.config import (
    Budget,
    EpisodeGateway,
    GatewayConfig,
    Price,
    Upstream,
    load_config,
)
from vtbench.gateway.proxy import Gateway
from vtbench.gateway.server import GatewayServer, serve
from vtbench.gateway.store import Totals, UsageStore
from vtbench.gateway.trajectory import ExchangeRecord, read_trajectory
from vtbench.gateway.usage import Usage

__all__ = [
    "BUDGET_MESSAGE",
    "Budget",
    "EpisodeGateway",
    "ExchangeRecord",
    "Gateway",
    "GatewayConfig",
    "GatewayServer",
    "Price",
    "Totals",
    "Upstream",
    "Usage",
    "UsageStore",
    "create_app",
    "load_config",
    "read_trajectory",
    "serve",
]
