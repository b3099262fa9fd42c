"""Gateway configuration: upstream providers, the price table and per-episode budgets.

The operator's config file (TOML) names each provider's upstream and where its real API key
comes from; the key is read from the operator's environment (``api_key_env``) or, less
safely, from the file itself (``api_key``). Budgets and the episode's identity come from the
runner (or ``vtbench gateway serve`` options), never from the agent.

Example ``gateway.toml``::

    default_price = { input = 15.0, output = 75.0 }   # USD per million tokens

    [anthropic]
    base_url = "https://api.anthropic.com"
    api_key_env = "ANTHROPIC_API_KEY"

    [openai]
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"

    [gemini]
    base_url = "https://generativelanguage.googleapis.com"
    api_key_env = "GEMINI_API_KEY"

    [prices."claude-sonnet-4-5"]
    input = 3.0
    output = 15.0
    cache_read = 0.3
    cache_write = 3.75

    [prices."gemini-2.5-pro"]
    input = 1.25
    output = 10.0          # thinking tokens are billed as output
    cache_read = 0.31

The real key goes upstream as each provider expects it: ``x-api-key`` (Anthropic),
``Authorization: Bearer`` (OpenAI), ``x-goog-api-key`` (Gemini).

Prices are looked up by the request's ``model``: an exact key first, then the longest key
that is a prefix of the model name (so ``claude-sonnet-4-5`` prices
``claude-sonnet-4-5-20250929``), then ``default_price``. The default of ``default_price`` is
deliberately expensive (15 / 75 USD per million input / output tokens) so that a model
missing from the table can exhaust a dollar budget early but never spend it for free.
"""

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from vtbench import layout
from vtbench.errors import GatewayError, SpecError
from vtbench.spec import first_problem, read_toml

Provider = Literal["anthropic", "openai", "gemini"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai", "gemini")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Price(Strict):
    """USD per million tokens of one model."""

    input: float = Field(ge=0)
    """Uncached input tokens."""
    output: float = Field(ge=0)
    """Output tokens (reasoning tokens included, as providers bill them)."""
    cache_read: float | None = Field(None, ge=0)
    """Input tokens read from the prompt cache; the input price when unset."""
    cache_write: float | None = Field(None, ge=0)
    """Input tokens written to the prompt cache (Anthropic); the input price when unset."""


class Upstream(Strict):
    """Where one provider's requests go and which key they carry."""

    base_url: str
    """Provider root, e.g. ``https://api.anthropic.com``, ``https://api.openai.com/v1`` or
    ``https://generativelanguage.googleapis.com``."""
    api_key_env: str | None = None
    """Name of the operator's environment variable holding the real key."""
    api_key: SecretStr | None = None
    """The key itself (prefer ``api_key_env``; a file is easier to leak)."""
    uds: Path | None = None
    """Connect through this unix socket instead of TCP (local upstreams, tests)."""
    timeout_s: float = Field(600.0, gt=0)
    """Longest silence from the upstream before the exchange fails."""

    def resolve_key(self, provider: str) -> str | None:
        """The real key; a named but unset variable is an error naming it."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise GatewayError(
                f"gateway: the {provider} key variable ${self.api_key_env} is not set",
                hint=f"export {self.api_key_env}=... in the operator's environment",
            )
        return key


class GatewayConfig(Strict):
    """The operator's gateway file: providers and prices (budgets are per episode)."""

    anthropic: Upstream | None = None
    """Upstream for the Anthropic Messages API; unset refuses those requests."""
    openai: Upstream | None = None
    """Upstream for the OpenAI Chat Completions and Responses APIs."""
    gemini: Upstream | None = None
    """Upstream for the Gemini API (generateContent, streamGenerateContent, countTokens)."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """Per-model prices, keyed by model name or model-name prefix."""
    default_price: Price = Price(input=15.0, output=75.0)
    """Price of a model the table does not name (deliberately expensive)."""
    max_request_bytes: int = Field(32 * 1024 * 1024, gt=0)
    """Largest request body accepted from the agent."""
    default_output_limit: int = Field(32_000, gt=0)
    """Under a budget, the output limit written into a request that names none (or what the
    budget leaves, if less); see :mod:`vtbench.gateway.budget`."""
    input_allowance_tokens: int = Field(1000, ge=0)
    """Input tokens a provider may add to a request's own bytes (a tool-use system prompt);
    part of every reservation under a budget."""

    def upstream(self, provider: Provider) -> Upstream | None:
        return {"anthropic": self.anthropic, "openai": self.openai,
                "gemini": self.gemini}[provider]

    def price(self, model: str | None) -> Price:
        if model is None:
            return self.default_price
        if model in self.prices:
            return self.prices[model]
        prefixes = [key for key in self.prices if model.startswith(key)]
        return self.prices[max(prefixes, key=len)] if prefixes else self.default_price


class Budget(Strict):
    """An episode's LLM budget; ``None`` is unlimited, 0 allows no request."""

    max_tokens: int | None = Field(None, ge=0)
    """Input (cached included) plus output tokens."""
    max_dollars: float | None = Field(None, ge=0)


class EpisodeGateway(Strict):
    """One episode's gateway: who it meters, its budget and where it writes."""

    episode_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    budget: Budget = Budget()
    usage_db: Path = Field(default_factory=lambda: default_usage_db())
    """SQLite (WAL) usage ledger; one file may hold many episodes."""
    trajectory: Path | None = None
    """JSONL log of every exchange; default ``<gateway dir>/episodes/<id>/exchanges.jsonl``."""

    def trajectory_path(self) -> Path:
        if self.trajectory is not None:
            return self.trajectory
        return gateway_dir() / "episodes" / self.episode_id / "exchanges.jsonl"


def gateway_dir() -> Path:
    return layout.home() / "gateway"


def default_usage_db() -> Path:
    return gateway_dir() / "usage.sqlite"


def load_config(path: Path) -> GatewayConfig:
    """Read a gateway TOML file; any problem is one :class:`SpecError` line."""
    raw = read_toml(path, "gateway config file")
    try:
        config = GatewayConfig.model_validate(raw)
    except ValidationError as err:
        raise SpecError(first_problem(path, err)) from err
    return _resolve_paths(config, path.parent)


def _resolve_paths(config: GatewayConfig, base: Path) -> GatewayConfig:
    updates: dict[str, Upstream] = {}
    for name in PROVIDERS:
        upstream = config.upstream(name)
        if upstream is not None and upstream.uds is not None and not upstream.uds.is_absolute():
            updates[name] = upstream.model_copy(update={"uds": base / upstream.uds})
    return config.model_copy(update=updates) if updates else config
