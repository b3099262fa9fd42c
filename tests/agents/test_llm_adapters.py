"""The LLM adapters' command lines and environments, and their shell prelude run for real."""

import json
import os
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest

from vtbench.agents import AgentContext, get_agent
from vtbench.agents.llm import (
    DUMMY_KEY,
    INSIDE_RUNTIME,
    LLM_AGENTS,
    AgentNotInstalled,
    AgentOptionUnsupported,
    runtime_mounts,
)
from vtbench.errors import VtbenchError

GATEWAY = "http://127.0.0.1:8089"
PROMPT = "Read /workspace/TASK.md; it's \"tricky\"\nsecond line"


def context(model: str | None = "model-x", effort: str | None = "high") -> AgentContext:
    return AgentContext(task="arith", seed=0, budget_minutes=5, prompt=PROMPT, model=model,
                        reasoning_effort=effort, gateway_url=GATEWAY)


def cli_argv(name: str, ctx: AgentContext) -> list[str]:
    """The CLI's own argv: what follows the prelude's ``--``."""
    command = get_agent(name).command(ctx)
    return command[command.index("--") + 1:]


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_every_llm_agent_resolves_by_name_and_needs_the_gateway() -> None:
    for name in ("claude-code", "codex", "gemini", "opencode"):
        agent = get_agent(name)
        assert agent.name == name and agent.needs_gateway and not agent.needs_playbook


def test_each_cli_runs_from_the_read_only_runtime_with_home_in_the_sandbox_tmp() -> None:
    for name in LLM_AGENTS:
        argv = cli_argv(name, context(effort=None))
        assert Path(argv[0]).parent == INSIDE_RUNTIME / "node_modules" / ".bin"
        env = get_agent(name).environment(context(effort=None))
        assert env["HOME"] == "/tmp/home"
        assert all(value.startswith("/tmp/home") for key, value in env.items()
                   if key.startswith("XDG_") or key in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"))


def test_no_adapter_passes_on_a_key_from_the_operators_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(variable, "sk-operator-real-key")
    for name in LLM_AGENTS:
        ctx = context(effort=None)
        text = json.dumps([get_agent(name).environment(ctx), get_agent(name).command(ctx)])
        assert "sk-operator-real-key" not in text
        assert DUMMY_KEY in text


def test_claude_code_is_headless_with_stream_json_and_no_vendor_traffic() -> None:
    argv = cli_argv("claude-code", context())
    assert argv[1:3] == ["-p", PROMPT]
    assert flag(argv, "--output-format") == "stream-json" and "--verbose" in argv
    assert "--dangerously-skip-permissions" in argv
    assert flag(argv, "--model") == "model-x" and flag(argv, "--effort") == "high"
    env = get_agent("claude-code").environment(context())
    assert env["ANTHROPIC_BASE_URL"] == GATEWAY and env["ANTHROPIC_API_KEY"] == DUMMY_KEY
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_claude_code_leaves_model_and_effort_to_its_defaults_when_unset() -> None:
    argv = cli_argv("claude-code", context(model=None, effort=None))
    assert "--model" not in argv and "--effort" not in argv


def test_codex_gets_a_responses_provider_at_the_gateway_as_valid_toml() -> None:
    argv = cli_argv("codex", context())
    assert argv[1:5] == ["exec", "--json", "--skip-git-repo-check",
                         "--dangerously-bypass-approvals-and-sandbox"]
    assert flag(argv, "-m") == "model-x" and argv[-1] == PROMPT
    settings = [argv[i + 1] for i, part in enumerate(argv) if part == "-c"]
    parsed = tomllib.loads("\n".join(settings))
    provider = parsed["model_providers"]["vtbench"]
    assert provider["base_url"] == f"{GATEWAY}/v1" and provider["wire_api"] == "responses"
    env = get_agent("codex").environment(context())
    assert env[provider["env_key"]] == DUMMY_KEY
    assert parsed["model_provider"] == "vtbench" and parsed["analytics"]["enabled"] is False
    assert parsed["model_reasoning_effort"] == "high"
    assert flag(argv, "--disable") == "plugins"


def test_gemini_points_at_the_gateway_and_refuses_a_reasoning_effort() -> None:
    argv = cli_argv("gemini", context(effort=None))
    assert argv[1:3] == ["-p", PROMPT] and "--yolo" in argv
    env = get_agent("gemini").environment(context(effort=None))
    assert env["GOOGLE_GEMINI_BASE_URL"] == GATEWAY and env["GEMINI_API_KEY"] == DUMMY_KEY
    with pytest.raises(AgentOptionUnsupported, match="reasoning-effort"):
        get_agent("gemini").command(context(effort="high"))


def test_opencode_config_names_the_gateway_for_the_chosen_provider() -> None:
    argv = cli_argv("opencode", context(model="openai/gpt-x"))
    assert argv[1:4] == ["run", "--format", "json"]
    assert flag(argv, "--model") == "openai/gpt-x" and flag(argv, "--variant") == "high"
    env = get_agent("opencode").environment(context(model="openai/gpt-x"))
    config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
    assert config["provider"] == {"openai": {"options": {"baseURL": f"{GATEWAY}/v1",
                                                         "apiKey": DUMMY_KEY},
                                             "models": {"gpt-x": {}}}}
    assert config["small_model"] == "openai/gpt-x"
    assert env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"


def test_opencode_defaults_a_bare_model_name_to_anthropic() -> None:
    argv = cli_argv("opencode", context(model="claude-x", effort=None))
    assert flag(argv, "--model") == "anthropic/claude-x" and "--variant" not in argv


def test_an_llm_agent_without_a_gateway_url_is_an_error() -> None:
    bare = AgentContext(task="arith", seed=0, budget_minutes=5, prompt="p")
    for name in LLM_AGENTS:
        with pytest.raises(VtbenchError, match="gateway"):
            get_agent(name).environment(bare)


def test_a_missing_runtime_names_the_setup_script(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VTBENCH_AGENTS_RUNTIME", str(tmp_path))
    with pytest.raises(AgentNotInstalled) as caught:
        runtime_mounts(get_agent("codex"))
    assert "scripts/setup" in caught.value.one_line()
    assert runtime_mounts(get_agent("noop")) == []


def test_a_present_runtime_is_mounted_read_only(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "node_modules" / ".bin").mkdir(parents=True)
    (tmp_path / "node_modules" / ".bin" / "claude").touch()
    monkeypatch.setenv("VTBENCH_AGENTS_RUNTIME", str(tmp_path))
    [mount] = runtime_mounts(get_agent("claude-code"))
    assert mount.source == tmp_path / "node_modules" and not mount.writable
    assert mount.target == INSIDE_RUNTIME / "node_modules"


@pytest.mark.parametrize("name", sorted(LLM_AGENTS))
def test_the_prelude_writes_config_closes_stdin_and_passes_argv_intact(
        name: str, tmp_path: Path) -> None:
    """Run the real prelude with the CLI swapped for a probe that reports what it got."""
    probe = tmp_path / "probe"
    probe.write_text("#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$HOME/argv\"\n"
                     "cat > \"$HOME/stdin\"\n")
    probe.chmod(probe.stat().st_mode | stat.S_IEXEC)
    ctx = context(effort=None)
    command = get_agent(name).command(ctx)
    split = command.index("--")
    files = dict(zip(command[4:split:2], command[5:split:2], strict=True))
    home = tmp_path / "home"
    rehomed = [part.replace("/tmp/home", str(home)) for part in command[:split]]
    subprocess.run([*rehomed, "--", str(probe), *command[split + 2:]], check=True,
                   env={"PATH": os.environ["PATH"], "HOME": str(home)}, input=b"not for the CLI",
                   timeout=30)
    assert (home / "argv").read_text() == "".join(f"{a}\n" for a in command[split + 2:])
    assert (home / "stdin").read_bytes() == b""
    for path, text in files.items():
        assert Path(path.replace("/tmp/home", str(home))).read_text() == text
