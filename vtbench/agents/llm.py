"""LLM agents: the real Claude Code, Codex, Gemini CLI and OpenCode, installed from npm.

Guarantees, for every adapter here: the CLI runs non-interactively (no approval prompts,
stdin is /dev/null); its base URL is the episode's gateway relay inside the sandbox
(``AgentContext.gateway_url``); the only API key it holds is :data:`DUMMY_KEY` (the gateway
drops it and sends the operator's real key upstream); its configuration, sessions and
transcripts live under ``/tmp/home`` (the sandbox's private tmpfs); its vendor's telemetry,
update checks and plugin or model-catalogue downloads are switched off, so its only
traffic is to the gateway. Model and reasoning effort come from the run config.

The CLIs are pinned in :data:`PACKAGES` and installed by ``scripts/setup`` (which runs
``vtbench.agents.llm.main``) into the runtime folder (``.agents-runtime/``,
git-ignored; ``$VTBENCH_AGENTS_RUNTIME`` overrides it), which the research sandbox mounts
read-only at :data:`INSIDE_RUNTIME`. Node is the host's ``/usr/bin/node`` (``/usr`` is
visible in the sandbox); Claude Code, Codex and OpenCode are native binaries.

Trusts: the pinned npm packages, only as far as the sandbox confines them. This module
never reads a real key; nothing it writes into the sandbox is secret.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

from vtbench import layout
from vtbench.agents.base import AgentContext
from vtbench.errors import MissingDependency, VtbenchError
from vtbench.sandbox import Mount

PACKAGES = {
    "claude-code": ("@anthropic-ai/claude-code", "2.1.332"),
    "codex": ("@openai/codex", "0.171.0"),
    "gemini": ("@google/gemini-cli", "0.61.0"),
    "opencode": ("opencode-ai", "1.18.33"),
}
INSIDE_RUNTIME = Path("/opt/vtbench-agents")
INSIDE_HOME = "/tmp/home"
DUMMY_KEY = "sk-vtbench-sandbox-dummy-key"
"""The key every CLI sends; the gateway drops it (credential headers are never forwarded)."""

# "$@" = (path content)*, "--", argv: writes the CLI's config files under $HOME, then runs
# the CLI with stdin closed (Codex, for one, waits for stdin's EOF otherwise).
_PRELUDE = r"""
mkdir -p "$HOME"
while [ "$1" != "--" ]; do
  mkdir -p "$(dirname "$1")"
  printf '%s' "$2" > "$1"
  shift 2
done
shift
exec "$@" < /dev/null
"""

_COMMON_ENV = {
    "HOME": INSIDE_HOME,
    "XDG_CONFIG_HOME": f"{INSIDE_HOME}/.config",
    "XDG_DATA_HOME": f"{INSIDE_HOME}/.local/share",
    "XDG_STATE_HOME": f"{INSIDE_HOME}/.local/state",
    "XDG_CACHE_HOME": f"{INSIDE_HOME}/.cache",
    "DO_NOT_TRACK": "1",
    "NO_UPDATE_NOTIFIER": "1",
}


class AgentNotInstalled(MissingDependency):
    exit_code = 2


class AgentOptionUnsupported(VtbenchError):
    exit_code = 2


def runtime_dir() -> Path:
    """The npm prefix holding the CLIs: ``$VTBENCH_AGENTS_RUNTIME`` or ``.agents-runtime/``."""
    configured = os.environ.get("VTBENCH_AGENTS_RUNTIME")
    path = Path(configured) if configured else layout.REPO_ROOT / ".agents-runtime"
    return path.expanduser().resolve()


class CliAgent:
    """What the four CLIs share; a subclass names its package and its flags and files."""

    name = ""
    binary = ""
    needs_gateway = True
    needs_playbook = False

    @property
    def package(self) -> str:
        return PACKAGES[self.name][0]

    def command(self, context: AgentContext) -> list[str]:
        files = self.files(gateway_url(context), context)
        pairs = [part for path, text in files.items() for part in (path, text)]
        executable = str(INSIDE_RUNTIME / "node_modules" / ".bin" / self.binary)
        return ["/bin/sh", "-c", _PRELUDE, f"vtbench-{self.name}", *pairs, "--",
                executable, *self.arguments(context)]

    def environment(self, context: AgentContext) -> dict[str, str]:
        return {**_COMMON_ENV, **self.variables(gateway_url(context), context)}

    def mounts(self) -> list[Mount]:
        """The runtime folder, read-only; a missing CLI is one line naming the fix."""
        modules = runtime_dir() / "node_modules"
        if not (modules / ".bin" / self.binary).exists():
            raise AgentNotInstalled(f"agent {self.name}: {self.package} is not installed in "
                                    f"{runtime_dir()}", hint="run scripts/setup")
        return [Mount(source=modules, target=INSIDE_RUNTIME / "node_modules")]

    # --- what each CLI adds ------------------------------------------------------------

    def arguments(self, context: AgentContext) -> list[str]:
        raise NotImplementedError

    def variables(self, url: str, context: AgentContext) -> dict[str, str]:
        return {}

    def files(self, url: str, context: AgentContext) -> dict[str, str]:
        """Config files (absolute paths inside the sandbox) written before the CLI starts."""
        return {}


def gateway_url(context: AgentContext) -> str:
    if context.gateway_url is None:
        raise VtbenchError("LLM agents need the episode's gateway (no gateway_url given)")
    return context.gateway_url.rstrip("/")


def option(flag: str, value: str | None) -> list[str]:
    return [flag, value] if value else []


class ClaudeCode(CliAgent):
    """``claude -p``; the Anthropic Messages API (``ANTHROPIC_BASE_URL``)."""

    name = "claude-code"
    binary = "claude"

    def arguments(self, context: AgentContext) -> list[str]:
        return ["-p", context.prompt, "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions", *option("--model", context.model),
                *option("--effort", context.reasoning_effort)]

    def variables(self, url: str, context: AgentContext) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": DUMMY_KEY,
                "CLAUDE_CONFIG_DIR": f"{INSIDE_HOME}/.claude",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "IS_SANDBOX": "1"}


class Codex(CliAgent):
    """``codex exec``; the OpenAI Responses API through a provider named ``vtbench``."""

    name = "codex"
    binary = "codex"
    key_variable = "VTBENCH_LLM_KEY"

    def arguments(self, context: AgentContext) -> list[str]:
        provider = {"name": "vtbench", "base_url": f"{gateway_url(context)}/v1",
                    "env_key": self.key_variable, "wire_api": "responses"}
        table = ",".join(f"{key}={json.dumps(value)}" for key, value in provider.items())
        effort = context.reasoning_effort
        return ["exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", *option("-m", context.model),
                "-c", f"model_providers.vtbench={{{table}}}", "-c", "model_provider=\"vtbench\"",
                "-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false",
                *(["-c", f"model_reasoning_effort={json.dumps(effort)}"] if effort else []),
                "--disable", "plugins", context.prompt]

    def variables(self, url: str, context: AgentContext) -> dict[str, str]:
        return {"CODEX_HOME": f"{INSIDE_HOME}/.codex", self.key_variable: DUMMY_KEY}

    def files(self, url: str, context: AgentContext) -> dict[str, str]:
        return {f"{INSIDE_HOME}/.codex/.keep": ""}  # CODEX_HOME must exist


class Gemini(CliAgent):
    """``gemini -p``; the Gemini API (``GOOGLE_GEMINI_BASE_URL``): ``streamGenerateContent``
    with ``alt=sse``, the dummy key in ``x-goog-api-key`` (the gateway sends the real one).
    Without ``--model`` the CLI routes each turn itself (model ``auto``): a classifier
    request (``generateContent`` on a flash-lite model) precedes the turn, and both are
    metered; its shell tool is ``run_shell_command``."""

    name = "gemini"
    binary = "gemini"

    def arguments(self, context: AgentContext) -> list[str]:
        if context.reasoning_effort:
            raise AgentOptionUnsupported("agent gemini: the Gemini CLI has no reasoning-effort "
                                         "option", hint="drop --reasoning-effort")
        return ["-p", context.prompt, "--output-format", "stream-json", "--yolo",
                "--skip-trust", *option("--model", context.model)]

    def variables(self, url: str, context: AgentContext) -> dict[str, str]:
        return {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": DUMMY_KEY,
                "GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_TELEMETRY_ENABLED": "false",
                # WebAssembly's guard regions need more address space than the sandbox's
                # RLIMIT_AS allows; without trap handlers Node reserves only what it uses.
                "NODE_OPTIONS": "--disable-wasm-trap-handler"}

    def files(self, url: str, context: AgentContext) -> dict[str, str]:
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": False},
                    "telemetry": {"enabled": False},
                    "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}
        return {f"{INSIDE_HOME}/.gemini/settings.json": json.dumps(settings)}


class OpenCode(CliAgent):
    """``opencode run``; ``--model provider/name`` picks Anthropic Messages (default) or
    OpenAI Responses, both pointed at the gateway by inline config."""

    name = "opencode"
    binary = "opencode"

    def arguments(self, context: AgentContext) -> list[str]:
        return ["run", "--format", "json", "--model", self.model(context),
                *option("--variant", context.reasoning_effort), context.prompt]

    def model(self, context: AgentContext) -> str:
        model = context.model or "claude-sonnet-4-5"
        return model if "/" in model else f"anthropic/{model}"

    def variables(self, url: str, context: AgentContext) -> dict[str, str]:
        provider, model = self.model(context).split("/", 1)
        options = {"baseURL": f"{url}/v1", "apiKey": DUMMY_KEY}
        config = {"$schema": "https://opencode.ai/config.json", "autoupdate": False,
                  "share": "disabled", "permission": "allow",
                  "small_model": self.model(context),  # titles: no other model is billed
                  "provider": {provider: {"options": options, "models": {model: {}}}}}
        return {"OPENCODE_CONFIG_CONTENT": json.dumps(config),
                "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
                "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1"}


LLM_AGENTS: dict[str, type[CliAgent]] = {
    agent.name: agent for agent in (ClaudeCode, Codex, Gemini, OpenCode)}


def runtime_mounts(agent: object) -> list[Mount]:
    """What an adapter needs mounted beyond the workspace (the CLIs' runtime, read-only)."""
    return agent.mounts() if isinstance(agent, CliAgent) else []


# --- installing the runtime ------------------------------------------------------------

def install(prefix: Path | None = None) -> Path:
    """Install the pinned CLIs with npm into ``prefix`` (idempotent) and check each runs."""
    prefix = prefix or runtime_dir()
    npm = shutil.which("npm")
    if npm is None:
        raise MissingDependency("npm is not installed (needed for the LLM agents)",
                                hint="apt-get install nodejs npm")
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / ".gitignore").write_text("*\n")
    manifest = {"name": "vtbench-agents-runtime", "private": True,
                "dependencies": {package: version for package, version in PACKAGES.values()}}
    wanted = json.dumps(manifest, indent=2) + "\n"
    stamp = prefix / ".installed"
    if stamp.exists() and stamp.read_text() == wanted and _all_run(prefix):
        return prefix
    (prefix / "package.json").write_text(wanted)
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix)],
                          capture_output=True, text=True)
    if done.returncode != 0 or not _all_run(prefix):
        raise MissingDependency(f"npm install into {prefix} failed: {done.stderr[-400:]}")
    stamp.write_text(wanted)
    return prefix


def _all_run(prefix: Path) -> bool:
    for agent in LLM_AGENTS.values():
        binary = prefix / "node_modules" / ".bin" / agent.binary
        try:
            done = subprocess.run([str(binary), "--version"], capture_output=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return False
        if done.returncode != 0:
            return False
    return True


def main() -> None:
    """``scripts/setup``'s entry point: install, or exit with the one-line error."""
    try:
        print(f"setup: LLM agents' CLIs ready in {install()}")
    except VtbenchError as err:
        raise SystemExit(err.one_line()) from err
