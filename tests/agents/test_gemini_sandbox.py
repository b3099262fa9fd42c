"""The Gemini CLI inside the research sandbox, talking straight to a Gemini API upstream.

What this proves, below the episode test (tests/episode/test_real_agents.py runs a whole
Gemini episode through the gateway): under the research sandbox's limits and without
network, the pinned Gemini CLI starts, sends nothing but Gemini API requests
(``streamGenerateContent`` with ``alt=sse``) to its base URL (the loopback relay), carries
only the dummy key, runs the ``run_shell_command`` call it is given inside ``/workspace``
and ends with a successful result. The relay points straight at the scripted upstream,
which records every request, so the test sees exactly what the CLI sends, before the
gateway replaces the key.
"""

import json
import shutil
from pathlib import Path

import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, call, say, scripted_upstream
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


def test_gemini_runs_a_shell_command_in_the_workspace_sending_only_gemini_api_requests(
        agents_runtime: Path, scripted_upstream: ScriptedUpstream, tmp_path: Path) -> None:
    scripted_upstream.play(
        call("run_shell_command", {"command": "echo sandboxed > proof.txt",
                                   "description": "write"}, text="Writing."),
        say("Done."))
    agent = get_agent("gemini")
    context = AgentContext(task="arith", seed=0, budget_minutes=2, prompt="write the proof",
                           model="gemini-test", gateway_url=f"http://127.0.0.1:{GATEWAY_PORT}")
    socket = grant_socket(scripted_upstream.socket_path)
    for folder in ("models/base", "models/initial", "harness"):  # the read-only overlays
        (tmp_path / "workspace" / folder).mkdir(parents=True)
    workspace = prepare_writable(tmp_path / "workspace")
    task = find_task("arith")
    spec = research_spec(task, agent, workspace, socket, "token", 120, task.spec.resources,
                         gateway_socket=socket, extra_env=agent.environment(context))
    spec = spec.model_copy(update={"mounts": [*spec.mounts, *runtime_mounts(agent)]})

    done = get_sandbox("bwrap").run(agent.command(context), spec)

    output = done.stdout.decode(errors="replace")
    assert done.returncode == 0 and not done.timed_out, output[-2000:]
    assert (workspace / "proof.txt").read_text() == "sandboxed\n"
    requests = scripted_upstream.requests
    assert [(r.path, r.query, r.step) for r in requests] == [
        ("/v1beta/models/gemini-test:streamGenerateContent", "alt=sse", step)
        for step in (0, 1)]
    assert all(r.headers.get("x-goog-api-key") == DUMMY_KEY for r in requests)
    events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert events[0]["type"] == "init" and events[-1]["type"] == "result"
    assert events[-1]["status"] == "success"
    assert [e["tool_name"] for e in events if e["type"] == "tool_use"] == ["run_shell_command"]
