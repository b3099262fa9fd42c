"""An LLM agent as a campaign entry: the real Claude Code CLI, named with its model, runs one
episode of a ``vtbench campaign`` process against the scripted upstream behind the episode's
own gateway; the campaign ledger, the episode record and the campaign report all carry the
model, and the gateway's metering reaches the record."""

from pathlib import Path

import pytest

from tests.campaign.episodes.conftest import rows, vtbench
from tests.episode.test_real_agents import (
    agents_runtime,
    gateway_file,
    play_research_script,
    served,
)
from tests.fakes.scripted_upstream import ScriptedUpstream, scripted_upstream
from vtbench.campaign.attempt import record_of

__all__ = ["agents_runtime", "gateway_file", "scripted_upstream"]
pytestmark = pytest.mark.slow

CAMPAIGN = """
tasks = ["{task}"]
seeds = [0]
[[agents]]
name = "claude-code"
model = "claude-test"
reasoning_effort = "high"
gateway_config = "{gateway}"
[budget]
budget_minutes = 4
"""


def test_an_llm_agent_entry_runs_with_its_model_through_the_gateway(
        agents_runtime: Path, prepared_arith: Path, grader: Path,
        scripted_upstream: ScriptedUpstream, gateway_file: Path, tmp_path: Path) -> None:
    play_research_script(scripted_upstream, "claude-code")
    plan = tmp_path / "campaign.toml"
    plan.write_text(CAMPAIGN.format(task=prepared_arith, gateway=gateway_file))
    out = tmp_path / "out"

    ran = vtbench("campaign", "run", str(plan), "--out", str(out))
    assert ran.returncode == 0, ran.stderr[-3000:]

    (row,) = rows(out).values()
    assert (row.key, row.state, row.attempts) == ("arith-claude-code_claude-test-s0",
                                                  "finished", 1)
    assert row.folder is not None
    record = record_of(out / row.folder)
    assert record is not None and record.submitted
    assert (record.agent, record.model, record.reasoning_effort) == (
        "claude-code", "claude-test", "high")
    requests, input_tokens, output_tokens = served(scripted_upstream)
    assert requests >= 3
    assert (record.llm.requests, record.llm.input_tokens, record.llm.output_tokens) == (
        requests, input_tokens, output_tokens)
    assert record.llm.dollars > 0

    report = tmp_path / "report.html"
    shown = vtbench("campaign", "report", str(out), "--html", str(report))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "claude-code (claude-test, effort high)" in report.read_text()
