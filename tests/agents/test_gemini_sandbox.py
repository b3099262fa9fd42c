"""The Gemini CLI inside the research sandbox, as far as it can go here.

The gateway speaks the Anthropic and OpenAI wire APIs, not the Gemini API, so a Gemini
episode cannot complete yet. What this proves: under the research sandbox's limits and
without network, the pinned Gemini CLI starts, sends nothing but Gemini API requests to
its base URL (the loopback relay), carries only the dummy key, and exits with an error
when the endpoint refuses. The relay points straight at the scripted upstream, which
records every request, so the test sees exactly what the CLI sends.
"""

import json
import shutil
from pathlib import Path

import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, scripted_upstream
from vtbench.agents import AgentContext, get_agent
from vtbench.agents.llm import DUMMY_KEY, install, runtime_mounts
from vtbench.episode.sandbox import GATEWAY_PORT, research_spec
from vtbench.sandbox import get_sandbox, grant_socket, prepare_writable
from vtbench.tasks import find_task

__all__ = ["scripted_upstream"]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def agents_runtime() -> Path:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    return install()


def test_gemini_sends_only_gemini_api_requests_with_the_dummy_key_to_its_relay(
        agents_runtime: Path, scripted_upstream: ScriptedUpstream, tmp_path: Path) -> None:
    agent = get_agent("gemini")
    context = AgentContext(task="arith", seed=0, budget_minutes=2, prompt="say hi",
                           model="gemini-test", gateway_url=f"http://127.0.0.1:{GATEWAY_PORT}")
    socket = grant_socket(scripted_upstream.socket_path)
    for folder in ("models/base", "models/initial", "harness"):  # the read-only overlays
        (tmp_path / "workspace" / folder).mkdir(parents=True)
    spec = research_spec(find_task("arith"), agent, prepare_writable(tmp_path / "workspace"),
                         socket, "token", 120, gateway_socket=socket,
                         extra_env=agent.environment(context))
    spec = spec.model_copy(update={"mounts": [*spec.mounts, *runtime_mounts(agent)]})

    done = get_sandbox("bwrap").run(agent.command(context), spec)

    errors = scripted_upstream.take_errors()
    assert done.returncode != 0 and not done.timed_out
    assert errors and all("streamGenerateContent" in error for error in errors)
    requests = scripted_upstream.requests
    assert requests and {r.path for r in requests} == {
        "/v1beta/models/gemini-test:streamGenerateContent"}
    assert all(r.headers.get("x-goog-api-key") == DUMMY_KEY for r in requests)
    events = [json.loads(line) for line in done.stdout.decode().splitlines()
              if line.startswith("{")]
    assert events[0]["type"] == "init" and events[-1]["type"] == "result"
    assert events[-1]["status"] == "error"
