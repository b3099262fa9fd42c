"""Real CLI agents from npm in a real episode: bwrap sandbox, grader, per-episode gateway.

The scripted upstream (the one part that cannot exist here: a paid LLM API) speaks each
provider's streaming wire protocol behind a real ``vtbench gateway serve`` process; the CLI
runs inside the research sandbox and reaches the gateway only through the loopback relay.
The script makes the CLI validate the initial model, append a row to ``data/train.jsonl``
and submit; the test then reads the ledger through the episode record, the snapshot
history beside the workspace, and compares the gateway's metering with what the upstream
served. Slow: the first run installs the pinned CLIs (``scripts/setup`` does the same).
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fakes.scripted_upstream import ScriptedUpstream, call, say, scripted_upstream
from vtbench.agents.llm import install
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.runner import RunOptions, run_episode

__all__ = ["scripted_upstream"]
pytestmark = pytest.mark.slow

REAL_KEYS = {"VTB_TEST_ANTHROPIC_KEY": "sk-ant-real-operator-key",
             "VTB_TEST_OPENAI_KEY": "sk-real-operator-openai-key",
             "VTB_TEST_GEMINI_KEY": "AIza-real-operator-gemini-key"}
ROW = '{"prompt": "Question: 2+2\\nAnswer:", "completion": " 4"}'
SHELL = {"claude-code": ("Bash", "command"), "codex": ("exec_command", "cmd"),
         "opencode": ("bash", "command"), "gemini": ("run_shell_command", "command")}
MODEL = {"claude-code": "claude-test", "codex": "gpt-test", "opencode": "anthropic/claude-test",
         "gemini": "gemini-test"}


@pytest.fixture(scope="module")
def agents_runtime() -> Path:
    if shutil.which("npm") is None and not (Path(".agents-runtime") / "node_modules").exists():
        pytest.skip("npm is not installed")
    return install()


@pytest.fixture
def gateway_file(scripted_upstream: ScriptedUpstream, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, key in REAL_KEYS.items():
        monkeypatch.setenv(name, key)
    path = tmp_path / "gateway.toml"
    socket = scripted_upstream.socket_path
    path.write_text(f"""
default_price = {{ input = 10.0, output = 20.0 }}
[anthropic]
base_url = "http://upstream"
uds = "{socket}"
api_key_env = "VTB_TEST_ANTHROPIC_KEY"
[openai]
base_url = "http://upstream/v1"
uds = "{socket}"
api_key_env = "VTB_TEST_OPENAI_KEY"
[gemini]
base_url = "http://upstream"
uds = "{socket}"
api_key_env = "VTB_TEST_GEMINI_KEY"
[prices.claude-test]
input = 3.0
output = 15.0
cache_read = 0.3
[prices.gpt-test]
input = 1.25
output = 10.0
cache_read = 0.125
[prices.gemini-test]
input = 2.0
output = 12.0
cache_read = 0.2
""")
    return path


def play_research_script(upstream: ScriptedUpstream, agent: str) -> None:
    tool, argument = SHELL[agent]
    extra = {"description": "step"} if agent != "codex" else {}
    upstream.play(
        call(tool, {argument: "vtbench validate --model models/initial --json > val.json",
                    **extra}, input_tokens=1200, output_tokens=40),
        call(tool, {argument: f"printf '%s\\n' '{ROW}' >> data/train.jsonl", **extra},
             input_tokens=300, output_tokens=30, cache_read_tokens=1000),
        call(tool, {argument: "vtbench submit --model models/initial", **extra},
             input_tokens=350, output_tokens=25, cache_read_tokens=1300),
        say("Submitted the initial model.", input_tokens=200, output_tokens=9,
            cache_read_tokens=1650))


def served(upstream: ScriptedUpstream) -> tuple[int, int, int]:
    """(requests, input tokens incl. cached, output tokens) the upstream answered."""
    answered = [upstream.script[r.step] for r in upstream.requests
                if r.step is not None and r.step < len(upstream.script)]
    return (len(answered),
            sum(r.input_tokens + r.cache_read_tokens + r.cache_write_tokens for r in answered),
            sum(r.output_tokens for r in answered))


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(folder / "snapshots.git"), *args],
                          capture_output=True, text=True, check=True).stdout


def run_real_agent(agent: str, task: Path, upstream: ScriptedUpstream, config: Path,
                   out: Path) -> tuple[EpisodeRecord, Path]:
    play_research_script(upstream, agent)
    record, path = run_episode(RunOptions(task=str(task), agent=agent, out=out,
                                          budget_minutes=4, model=MODEL[agent],
                                          gateway_config=config))
    folder = path.parent
    log = (folder / "agent.log").read_text(errors="replace")
    assert record.submitted, f"{agent} did not submit; agent log:\n{log[-4000:]}"
    return record, folder


def check_episode(record: EpisodeRecord, folder: Path, upstream: ScriptedUpstream) -> None:
    # One validation in the ledger; it spends no credit where an earlier test of this module
    # already scored the same initial model (a cached repeat).
    assert len(record.validations) == 1 and record.validations[0].score is not None
    assert record.validations_used == (0 if record.validations[0].cached else 1)
    assert record.submission is not None and record.submission.candidate == "models/initial"
    assert record.gain == 0.0
    history = git(folder, "log", "--format=%H %s", "--reverse").splitlines()
    assert len(history) == 3 and history[0].split(" ", 1)[1].startswith("snapshot 0")
    commits = [line.split(" ", 1)[0] for line in history]
    assert commits[1] == record.validations[0].snapshot
    assert commits[2] == record.submission.snapshot
    assert ROW not in git(folder, "show", f"{commits[1]}:data/train.jsonl")
    assert git(folder, "show", f"{commits[2]}:data/train.jsonl").splitlines()[-1] == ROW
    requests, input_tokens, output_tokens = served(upstream)
    assert requests >= 3  # validate, edit, submit (the final text may be cut by the stop)
    assert (record.llm.requests, record.llm.input_tokens, record.llm.output_tokens) == (
        requests, input_tokens, output_tokens)
    assert record.llm.dollars > 0
    exchanges = (folder / "llm-trajectory.jsonl").read_text().splitlines()
    assert len(exchanges) == requests


def check_keys(upstream: ScriptedUpstream, folder: Path, header: str, value: str) -> None:
    completions = [r for r in upstream.requests if r.step is not None]
    assert completions and all(r.headers.get(header) == value for r in completions)
    seen_by_agent = (folder / "agent.log").read_text(errors="replace")
    assert all(key not in seen_by_agent for key in REAL_KEYS.values())


def test_claude_code_validates_edits_and_submits_inside_the_sandbox(
        agents_runtime: Path, prepared_arith: Path, grader: Path,
        scripted_upstream: ScriptedUpstream, gateway_file: Path, tmp_path: Path) -> None:
    record, folder = run_real_agent("claude-code", prepared_arith, scripted_upstream,
                                    gateway_file, tmp_path / "runs")
    check_episode(record, folder, scripted_upstream)
    check_keys(scripted_upstream, folder, "x-api-key", REAL_KEYS["VTB_TEST_ANTHROPIC_KEY"])
    assert json.loads((folder / "workspace" / "val.json").read_text())["score"] is not None


def test_codex_validates_edits_and_submits_inside_the_sandbox(
        agents_runtime: Path, prepared_arith: Path, grader: Path,
        scripted_upstream: ScriptedUpstream, gateway_file: Path, tmp_path: Path) -> None:
    record, folder = run_real_agent("codex", prepared_arith, scripted_upstream, gateway_file,
                                    tmp_path / "runs")
    check_episode(record, folder, scripted_upstream)
    check_keys(scripted_upstream, folder, "authorization",
               f"Bearer {REAL_KEYS['VTB_TEST_OPENAI_KEY']}")
    assert all(r.api == "responses" for r in scripted_upstream.requests if r.step is not None)


def test_opencode_validates_edits_and_submits_inside_the_sandbox(
        agents_runtime: Path, prepared_arith: Path, grader: Path,
        scripted_upstream: ScriptedUpstream, gateway_file: Path, tmp_path: Path) -> None:
    record, folder = run_real_agent("opencode", prepared_arith, scripted_upstream,
                                    gateway_file, tmp_path / "runs")
    check_episode(record, folder, scripted_upstream)
    check_keys(scripted_upstream, folder, "x-api-key", REAL_KEYS["VTB_TEST_ANTHROPIC_KEY"])


def test_gemini_cli_validates_edits_and_submits_inside_the_sandbox(
        agents_runtime: Path, prepared_arith: Path, grader: Path,
        scripted_upstream: ScriptedUpstream, gateway_file: Path, tmp_path: Path) -> None:
    record, folder = run_real_agent("gemini", prepared_arith, scripted_upstream, gateway_file,
                                    tmp_path / "runs")
    check_episode(record, folder, scripted_upstream)
    check_keys(scripted_upstream, folder, "x-goog-api-key", REAL_KEYS["VTB_TEST_GEMINI_KEY"])
    completions = [r for r in scripted_upstream.requests if r.step is not None]
    assert {(r.path, r.query) for r in completions} == {
        ("/v1beta/models/gemini-test:streamGenerateContent", "alt=sse")}
    exchanges = [json.loads(line) for line in
                 (folder / "llm-trajectory.jsonl").read_text().splitlines()]
    assert {line["api"] for line in exchanges} == {"gemini-stream"}
    assert exchanges[0]["response"]["candidates"][0]["content"]["parts"][0]["functionCall"][
        "name"] == "run_shell_command"
