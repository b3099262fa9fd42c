"""The filter baseline's data edit: malformed rows, repeats and contradicting labels go,
the other rows stay verbatim, only ``data/*.jsonl`` is written; and it works on the data of
every tiny task."""

import json
import shutil
from pathlib import Path

import pytest

from vtbench import layout
from vtbench.agents import AgentContext, get_agent
from vtbench.agents.filter_agent import FilterCounts, filter_data, filter_rows

TINY_TASKS = ("arith", "extract", "toolcalc", "dsl")
GOOD = '{"prompt": "Q: 1+1\\nA:", "completion": " 2", "source": "mine"}'


def test_malformed_repeated_and_contradicting_rows_go_and_the_rest_stays_verbatim() -> None:
    lines = [
        GOOD,
        "not json at all",
        '["a", "list"]',
        '{"prompt": "Q: 2+2\\nA:"}',
        '{"prompt": 7, "completion": " 7"}',
        '{"prompt": "Q: 1+1\\nA:",   "completion": " 2"}',
        '{"prompt": "Q: 3+3\\nA:", "completion": " 6"}',
        '{"prompt": "Q: 3+3\\nA:", "completion": " 7"}',
        "",
        '{"prompt": "Q: 5+5\\nA:", "completion": " 10"}',
    ]
    counts = FilterCounts()
    keep = filter_rows(lines, counts)
    assert [line for line, kept in zip(lines, keep, strict=True) if kept] == [lines[0], lines[9]]
    assert counts == FilterCounts(kept=2, malformed=4, duplicates=1, inconsistent=2)
    assert counts.dropped == 7


def test_repeats_and_contradictions_are_found_across_files_and_other_files_stay(
        tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(GOOD + "\n" + '{"prompt": "p", "completion": "x"}\n')
    (tmp_path / "b.jsonl").write_text(GOOD + "\n" + '{"prompt": "p", "completion": "y"}\n'
                                      '{"prompt": "q", "completion": "z"}\n')
    (tmp_path / "notes.txt").write_text("not json at all\n")
    counts = filter_data(tmp_path)
    assert (tmp_path / "a.jsonl").read_text() == GOOD + "\n"
    assert (tmp_path / "b.jsonl").read_text() == '{"prompt": "q", "completion": "z"}\n'
    assert (tmp_path / "notes.txt").read_text() == "not json at all\n"
    assert counts == FilterCounts(kept=2, malformed=0, duplicates=1, inconsistent=2)


@pytest.mark.parametrize("task", TINY_TASKS)
def test_the_filter_leaves_every_tiny_task_rows_its_trainer_reads(
        task: str, tmp_path: Path) -> None:
    data = shutil.copytree(layout.BUILTIN_TASKS / task / "public" / "data", tmp_path / "data")
    before = sum(len(p.read_text().splitlines()) for p in data.glob("*.jsonl"))
    counts = filter_data(data)
    assert counts.kept + counts.dropped == before and counts.kept >= 16
    rows = [json.loads(line) for p in data.glob("*.jsonl") for line in p.read_text().splitlines()]
    assert len(rows) == counts.kept
    assert len({(row["prompt"], row["completion"]) for row in rows}) == len(rows)
    assert filter_data(data).dropped == 0


def test_the_filter_runs_as_a_scripted_agent_without_llm_or_playbook() -> None:
    agent = get_agent("filter")
    assert not agent.needs_gateway and not agent.needs_playbook
    context = AgentContext(task="arith", seed=3, budget_minutes=1.0, prompt="")
    assert agent.command(context)[-4:] == ["-m", "vtbench.agents.filter_agent", "--seed", "3"]
