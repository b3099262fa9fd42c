"""The runner's per-episode gateway: a real ``vtbench gateway serve`` process on a unix socket."""

from pathlib import Path

import httpx
import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, say, scripted_upstream
from vtbench.episode.gateway_process import (
    GatewayNotConfigured,
    config_path,
    llm_usage,
    running_gateway,
    socket_path,
)
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.errors import GatewayError
from vtbench.spec import Budgets

__all__ = ["scripted_upstream"]
BUDGETS = Budgets(wall_clock_minutes=5, validations=3, grader_compute_seconds=60,
                  llm_tokens=3000, llm_dollars=1.0)


def write_config(upstream: ScriptedUpstream, folder: Path) -> Path:
    path = folder / "gateway.toml"
    path.write_text(f'[anthropic]\nbase_url = "http://upstream"\nuds = "{upstream.socket_path}"\n'
                    'api_key_env = "VTB_GW_TEST_KEY"\n'
                    '[prices.claude-test]\ninput = 3.0\noutput = 15.0\n')
    return path


def ask(socket: Path, tokens: int = 16) -> httpx.Response:
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket)), base_url="http://gw",
                      timeout=30, trust_env=False) as http:
        return http.post("/v1/messages", json={"model": "claude-test", "max_tokens": tokens,
                                               "messages": [{"role": "user", "content": "hi"}]})


def test_no_gateway_config_is_one_line_naming_both_ways_to_give_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VTBENCH_GATEWAY_CONFIG", raising=False)
    with pytest.raises(GatewayNotConfigured) as caught:
        config_path(None, "codex")
    line = caught.value.one_line()
    assert "\n" not in line and "--gateway-config" in line and "VTBENCH_GATEWAY_CONFIG" in line


def test_the_environment_names_the_config_when_the_option_does_not(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text("")
    monkeypatch.setenv("VTBENCH_GATEWAY_CONFIG", str(tmp_path / "g.toml"))
    assert config_path(None, "codex") == tmp_path / "g.toml"
    with pytest.raises(GatewayNotConfigured, match="does not exist"):
        config_path(tmp_path / "missing.toml", "codex")


def test_an_llm_agent_without_a_config_stops_before_any_episode_exists(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VTBENCH_GATEWAY_CONFIG", raising=False)
    with pytest.raises(GatewayNotConfigured):
        run_episode(RunOptions(task="arith", agent="claude-code", out=tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


def test_a_long_episode_folder_gets_its_socket_in_a_short_private_path(tmp_path: Path) -> None:
    assert socket_path(tmp_path) == tmp_path / "gateway.sock"
    deep = tmp_path / ("x" * 90)
    assert len(str(socket_path(deep))) < 108 and socket_path(deep).parent != deep


def test_the_episode_gateway_meters_into_the_episode_folder_and_stops(
        scripted_upstream: ScriptedUpstream, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTB_GW_TEST_KEY", "sk-real")
    scripted_upstream.play(say("one", input_tokens=300, output_tokens=20, cache_read_tokens=100),
                           say("two", input_tokens=1900, output_tokens=30), pick="sequence")
    with running_gateway(write_config(scripted_upstream, tmp_path), "ep-7", BUDGETS,
                         tmp_path) as socket:
        assert ask(socket).status_code == 200
        assert ask(socket).status_code == 200
        # 2350 of 3000 tokens spent: the next request's worst case (its bytes, the input
        # allowance and its max_tokens) does not fit in what is left
        refused = ask(socket)
        assert refused.status_code >= 400 and "budget" in refused.text
    assert not socket.exists()
    assert len(scripted_upstream.requests) == 2
    assert scripted_upstream.requests[0].headers["x-api-key"] == "sk-real"
    usage = llm_usage(tmp_path, "ep-7")
    assert (usage.requests, usage.input_tokens, usage.output_tokens) == (2, 2300, 50)
    assert usage.dollars == pytest.approx((2300 * 3.0 + 50 * 15.0) / 1e6)
    assert len((tmp_path / "llm-trajectory.jsonl").read_text().splitlines()) >= 2


def test_a_gateway_that_cannot_start_says_where_its_log_is(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[anthropic]\nbase_url = 3\n")
    with (pytest.raises(GatewayError, match="gateway did not start") as caught,
          running_gateway(broken, "ep-8", BUDGETS, tmp_path)):
        pass
    assert "gateway.log" in str(caught.value.hint)


def test_an_episode_without_an_llm_agent_has_no_llm_usage(tmp_path: Path) -> None:
    assert llm_usage(tmp_path, "ep-none").requests == 0
