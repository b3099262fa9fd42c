"""Gateway fixtures: a scripted upstream and a real gateway in front of it, on unix sockets."""

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, scripted_upstream
from vtbench.gateway import (
    Budget,
    EpisodeGateway,
    GatewayConfig,
    GatewayServer,
    Price,
    Upstream,
    UsageStore,
    create_app,
    read_trajectory,
)
from vtbench.gateway.store import Totals
from vtbench.gateway.trajectory import ExchangeRecord

__all__ = ["scripted_upstream"]

REAL_ANTHROPIC_KEY = "sk-ant-real-operator-key"
REAL_OPENAI_KEY = "sk-real-operator-openai-key"
REAL_GEMINI_KEY = "AIza-real-operator-gemini-key"
PRICES = {"claude-test": Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
          "gpt-test": Price(input=1.25, output=10.0, cache_read=0.125),
          "gemini-test": Price(input=2.0, output=12.0, cache_read=0.2)}


def gateway_config(upstream: ScriptedUpstream) -> GatewayConfig:
    return GatewayConfig(
        anthropic=Upstream(base_url="http://upstream", uds=upstream.socket_path,
                           api_key_env="VTB_TEST_ANTHROPIC_KEY"),
        openai=Upstream(base_url="http://upstream/v1", uds=upstream.socket_path,
                        api_key_env="VTB_TEST_OPENAI_KEY"),
        gemini=Upstream(base_url="http://upstream", uds=upstream.socket_path,
                        api_key_env="VTB_TEST_GEMINI_KEY"),
        prices=PRICES, default_price=Price(input=10.0, output=20.0))


@dataclass
class RunningGateway:
    server: GatewayServer
    episode: EpisodeGateway
    client: httpx.Client

    def totals(self) -> Totals:
        store = UsageStore(self.episode.usage_db)
        try:
            return store.totals(self.episode.episode_id)
        finally:
            store.close()

    def trajectory(self) -> list[ExchangeRecord]:
        return read_trajectory(self.episode.trajectory_path())

    @property
    def socket_path(self) -> Path:
        assert self.server.socket_path is not None
        return self.server.socket_path


@pytest.fixture
def upstream_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTB_TEST_ANTHROPIC_KEY", REAL_ANTHROPIC_KEY)
    monkeypatch.setenv("VTB_TEST_OPENAI_KEY", REAL_OPENAI_KEY)
    monkeypatch.setenv("VTB_TEST_GEMINI_KEY", REAL_GEMINI_KEY)


@pytest.fixture
def start_gateway(
    scripted_upstream: ScriptedUpstream, upstream_keys: None, tmp_path: Path
) -> Iterator[Callable[..., RunningGateway]]:
    """Start a gateway for one episode in front of the scripted upstream (unix sockets)."""
    started: list[RunningGateway] = []
    socket_dir = Path(tempfile.mkdtemp(prefix="vtb-gw-", dir="/tmp"))

    def start(episode_id: str = "ep-1", budget: Budget | None = None,
              config: GatewayConfig | None = None) -> RunningGateway:
        episode = EpisodeGateway(episode_id=episode_id, budget=budget or Budget(),
                                 usage_db=tmp_path / "usage.sqlite",
                                 trajectory=tmp_path / episode_id / "exchanges.jsonl")
        app = create_app(config or gateway_config(scripted_upstream), episode)
        server = GatewayServer(app, socket_path=socket_dir / f"{episode_id}.sock").start()
        client = httpx.Client(transport=httpx.HTTPTransport(uds=str(server.socket_path)),
                              base_url="http://gateway", timeout=30, trust_env=False)
        running = RunningGateway(server, episode, client)
        started.append(running)
        return running

    yield start
    for running in started:
        running.client.close()
        running.server.stop()
    shutil.rmtree(socket_dir, ignore_errors=True)
