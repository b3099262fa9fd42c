"""The real Claude Code, Codex and Gemini CLIs through the gateway to the scripted upstream.

Slow (npm install of Claude Code and Codex on first use, about 20 s and 660 MB, cached in
the temp dir; the Gemini CLI comes from the agents' runtime that ``scripts/setup``
installs). Each CLI gets one scripted tool call (its shell tool writes a file) and one
final text; the gateway serves on loopback TCP (no sandbox here, so no relay is needed) and
must meter exactly the tokens the upstream reported, while the upstream sees only the real
key. A spent budget must reach each CLI's output as the gateway's one-line refusal.
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, call, say
from tests.gateway.conftest import (
    REAL_ANTHROPIC_KEY,
    REAL_GEMINI_KEY,
    REAL_OPENAI_KEY,
    gateway_config,
)
from vtbench.agents import AgentContext
from vtbench.agents.llm import DUMMY_KEY, Gemini, install
from vtbench.gateway import EpisodeGateway, GatewayServer, UsageStore, create_app

pytestmark = pytest.mark.slow
CLI_PREFIX = Path(tempfile.gettempdir()) / "vtbench-test-clis"
AGENT_KEY = "sk-agent-fake"


@pytest.fixture(scope="module")
def cli_bin() -> Path:
    bin_dir = CLI_PREFIX / "node_modules" / ".bin"
    if not ((bin_dir / "claude").exists() and (bin_dir / "codex").exists()):
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed")
        CLI_PREFIX.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix",
                        str(CLI_PREFIX), "@anthropic-ai/claude-code", "@openai/codex"],
                       check=True, capture_output=True, timeout=600)
    return bin_dir


@pytest.fixture
def tcp_gateway(scripted_upstream: ScriptedUpstream, upstream_keys: None, tmp_path: Path
                ) -> Any:
    episode = EpisodeGateway(episode_id="cli", usage_db=tmp_path / "usage.sqlite",
                             trajectory=tmp_path / "exchanges.jsonl")
    server = GatewayServer(create_app(gateway_config(scripted_upstream), episode), port=0)
    with server:
        yield server, episode


def metered(episode: EpisodeGateway) -> tuple[int, int, int]:
    store = UsageStore(episode.usage_db)
    totals = store.totals(episode.episode_id)
    store.close()
    return totals.exchanges, totals.input_tokens, totals.output_tokens


def test_claude_code_runs_a_scripted_tool_call_through_the_gateway(
    cli_bin: Path, scripted_upstream: ScriptedUpstream, tcp_gateway: Any, tmp_path: Path
) -> None:
    server, episode = tcp_gateway
    scripted_upstream.play(
        call("Bash", {"command": "echo gateway-ok > proof.txt", "description": "write"},
             input_tokens=300, output_tokens=20),
        say("All done.", input_tokens=350, output_tokens=5))
    work, config = tmp_path / "work", tmp_path / "claude-config"
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(config),
           "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": AGENT_KEY,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
           "IS_SANDBOX": "1"}
    result = subprocess.run(
        [str(cli_bin / "claude"), "-p", "write the proof file", "--output-format",
         "stream-json", "--verbose", "--dangerously-skip-permissions", "--model",
         "claude-test", "--bare", "--tools", "Bash"],
        cwd=work, env=env, capture_output=True, text=True, timeout=180,
        stdin=subprocess.DEVNULL)

    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    final = [json.loads(line) for line in result.stdout.splitlines()
             if line.startswith("{")][-1]
    assert final["type"] == "result" and not final["is_error"]
    assert (work / "proof.txt").read_text() == "gateway-ok\n"
    assert metered(episode) == (2, 650, 25)
    completions = [r for r in scripted_upstream.requests if r.api == "anthropic"]
    assert len(completions) == 2
    for recorded in completions:
        assert recorded.headers.get("x-api-key") == REAL_ANTHROPIC_KEY
        assert AGENT_KEY not in json.dumps(recorded.headers)


def test_codex_runs_a_scripted_exec_command_through_the_gateway(
    cli_bin: Path, scripted_upstream: ScriptedUpstream, tcp_gateway: Any, tmp_path: Path
) -> None:
    server, episode = tcp_gateway
    scripted_upstream.play(
        call("exec_command", {"cmd": "echo gateway-ok > proof.txt"},
             input_tokens=400, output_tokens=30, cache_read_tokens=100),
        say("All done.", input_tokens=420, output_tokens=6))
    work, codex_home = tmp_path / "work", tmp_path / "codex-home"
    work.mkdir()
    codex_home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CODEX_HOME": str(codex_home),
           "VTB_AGENT_KEY": AGENT_KEY}
    provider = ("model_providers.vtb={name=\"vtb\",base_url=\"" + server.base_url
                + "/v1\",env_key=\"VTB_AGENT_KEY\",wire_api=\"responses\","
                "request_max_retries=0,stream_max_retries=0}")
    result = subprocess.run(
        [str(cli_bin / "codex"), "exec", "--json", "--skip-git-repo-check",
         "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-test",
         "-c", provider, "-c", "model_provider=vtb", "-c", "analytics.enabled=false",
         "--disable", "plugins", "write the proof file"],
        cwd=work, env=env, capture_output=True, text=True, timeout=180,
        stdin=subprocess.DEVNULL)

    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (work / "proof.txt").read_text() == "gateway-ok\n"
    store = UsageStore(episode.usage_db)
    totals = store.totals(episode.episode_id)
    store.close()
    assert (totals.exchanges, totals.input_tokens, totals.cache_read_tokens,
            totals.output_tokens) == (2, 820, 100, 36)
    completions = [r for r in scripted_upstream.requests if r.api == "responses"]
    assert len(completions) == 2
    for recorded in completions:
        assert recorded.headers.get("authorization") == f"Bearer {REAL_OPENAI_KEY}"
    assert REAL_OPENAI_KEY not in result.stdout


@pytest.fixture
def spent_gateway(scripted_upstream: ScriptedUpstream, upstream_keys: None, tmp_path: Path
                  ) -> Any:
    episode = EpisodeGateway(episode_id="spent", usage_db=tmp_path / "usage.sqlite",
                             budget={"max_tokens": 0})
    server = GatewayServer(create_app(gateway_config(scripted_upstream), episode), port=0)
    with server:
        yield server


def test_claude_code_shows_the_budget_refusal(
    cli_bin: Path, scripted_upstream: ScriptedUpstream, spent_gateway: GatewayServer,
    tmp_path: Path,
) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "c"), "ANTHROPIC_BASE_URL": spent_gateway.base_url,
           "ANTHROPIC_API_KEY": AGENT_KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "CLAUDE_CODE_MAX_RETRIES": "0", "IS_SANDBOX": "1"}
    result = subprocess.run(
        [str(cli_bin / "claude"), "-p", "hi", "--output-format", "stream-json", "--verbose",
         "--dangerously-skip-permissions", "--model", "claude-test", "--bare"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)

    assert result.returncode == 1
    assert "VibeTraining-Bench LLM budget exhausted" in result.stdout
    assert [r for r in scripted_upstream.requests if r.api == "anthropic"] == []


def test_codex_shows_the_budget_refusal(
    cli_bin: Path, scripted_upstream: ScriptedUpstream, spent_gateway: GatewayServer,
    tmp_path: Path,
) -> None:
    (tmp_path / "h").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CODEX_HOME": str(tmp_path / "h"),
           "VTB_AGENT_KEY": AGENT_KEY}
    provider = ("model_providers.vtb={name=\"vtb\",base_url=\"" + spent_gateway.base_url
                + "/v1\",env_key=\"VTB_AGENT_KEY\",wire_api=\"responses\","
                "request_max_retries=0,stream_max_retries=0}")
    result = subprocess.run(
        [str(cli_bin / "codex"), "exec", "--json", "--skip-git-repo-check",
         "--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-test", "-c", provider,
         "-c", "model_provider=vtb", "-c", "analytics.enabled=false", "--disable", "plugins",
         "hi"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)

    assert result.returncode != 0
    assert "VibeTraining-Bench LLM budget exhausted" in result.stdout + result.stderr
    assert [r for r in scripted_upstream.requests if r.api == "responses"] == []


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    runtime = Path(".agents-runtime") / "node_modules"
    if shutil.which("npm") is None and not runtime.exists():
        pytest.skip("npm is not installed")
    return install() / "node_modules" / ".bin" / "gemini"


def run_gemini(binary: Path, base_url: str, home: Path, prompt: str
               ) -> subprocess.CompletedProcess[str]:
    """The CLI as the adapter configures it (its settings file and variables), on the host."""
    adapter = Gemini()
    context = AgentContext(task="arith", seed=0, budget_minutes=2, prompt=prompt,
                           model="gemini-test", gateway_url=base_url)
    [settings] = adapter.files(base_url, context).values()
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(settings)
    work = home / "work"
    work.mkdir()
    env = {**adapter.variables(base_url, context), "PATH": os.environ["PATH"],
           "HOME": str(home)}
    return subprocess.run([str(binary), *adapter.arguments(context)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)


def test_gemini_cli_runs_a_scripted_shell_command_through_the_gateway(
    gemini_bin: Path, scripted_upstream: ScriptedUpstream, tcp_gateway: Any, tmp_path: Path
) -> None:
    server, episode = tcp_gateway
    scripted_upstream.play(
        call("run_shell_command", {"command": "echo gateway-ok > proof.txt",
                                   "description": "write"}, text="Writing it.",
             input_tokens=500, output_tokens=20, cache_read_tokens=200, thoughts_tokens=15),
        say("All done.", input_tokens=560, output_tokens=5))

    result = run_gemini(gemini_bin, server.base_url, tmp_path / "home", "write the proof file")

    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    final = [json.loads(line) for line in result.stdout.splitlines()
             if line.startswith("{")][-1]
    assert final["type"] == "result" and final["status"] == "success"
    assert (tmp_path / "home" / "work" / "proof.txt").read_text() == "gateway-ok\n"
    store = UsageStore(episode.usage_db)
    totals = store.totals(episode.episode_id)
    store.close()
    assert (totals.exchanges, totals.input_tokens, totals.cache_read_tokens,
            totals.output_tokens) == (2, 1060, 200, 40)
    completions = [r for r in scripted_upstream.requests if r.api == "gemini"]
    assert [r.path for r in completions] == [
        "/v1beta/models/gemini-test:streamGenerateContent"] * 2
    for recorded in completions:
        assert recorded.headers.get("x-goog-api-key") == REAL_GEMINI_KEY
        assert DUMMY_KEY not in json.dumps([recorded.headers, recorded.query])
    assert REAL_GEMINI_KEY not in result.stdout + result.stderr


def test_gemini_cli_shows_the_budget_refusal(
    gemini_bin: Path, scripted_upstream: ScriptedUpstream, spent_gateway: GatewayServer,
    tmp_path: Path,
) -> None:
    result = run_gemini(gemini_bin, spent_gateway.base_url, tmp_path / "home", "hi")

    assert result.returncode != 0
    final = [json.loads(line) for line in result.stdout.splitlines()
             if line.startswith("{")][-1]
    assert final["type"] == "result" and final["status"] == "error"
    assert "VibeTraining-Bench LLM budget exhausted" in final["error"]["message"]
    assert [r for r in scripted_upstream.requests if r.api == "gemini"] == []
