"""The filter baseline's generic data edit (a task without a row check): malformed rows,
repeats and contradicting labels go, the other rows stay verbatim, only ``data/*.jsonl`` is
written; a task's row check runs before the repeats are counted, so a mislabelled copy does
not take its correct row with it; and it works on the data of every tiny task."""

import json
import shutil
from pathlib import Path

import pytest

from vtbench import layout
from vtbench.agents import AgentContext, get_agent
from vtbench.agents.filter_agent import FilterCounts, filter_data, filter_rows
from vtbench.agents.row_checks import Arith, row_check

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
    written = filter_rows(lines, counts)
    assert [line for line in written if line is not None] == [lines[0], lines[9]]
    assert counts == FilterCounts(kept=2, malformed=4, duplicates=1, contradicting=2)
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
    assert counts == FilterCounts(kept=2, malformed=0, duplicates=1, contradicting=2)


def test_a_checked_row_is_rewritten_keeping_its_other_keys_and_a_wrong_copy_only_goes(
        ) -> None:
    question = "Sue has 8 shells. Sue buys 23 more and gives away 9. How many?"
    right = {"prompt": f"Q: {question}\nA:", "completion": " 8+23=31. 31-9=22. Answer: 22",
             "source": "mine"}
    wrong = {**right, "prompt": f"Question: {question}\nAnswer:",
             "completion": " 8+23=31. 31-9=21. Answer: 21"}
    counts = FilterCounts()
    written = filter_rows([json.dumps(right), json.dumps(wrong)], counts, Arith())
    assert [json.loads(line) for line in written if line] == [
        {**right, "prompt": f"Question: {question}\nAnswer:"}]
    assert counts == FilterCounts(kept=1, rewritten=1, mislabelled=1)


@pytest.mark.parametrize("task", TINY_TASKS)
def test_the_filter_leaves_every_tiny_task_rows_its_trainer_reads(
        task: str, tmp_path: Path) -> None:
    shutil.copytree(layout.BUILTIN_TASKS / task / "public" / "harness", tmp_path / "harness")
    data = shutil.copytree(layout.BUILTIN_TASKS / task / "public" / "data", tmp_path / "data")
    before = sum(len(p.read_text().splitlines()) for p in data.glob("*.jsonl"))
    counts = filter_data(data, row_check(tmp_path))
    assert counts.kept + counts.dropped == before and counts.kept >= 16
    rows = [json.loads(line) for p in data.glob("*.jsonl") for line in p.read_text().splitlines()]
    assert len(rows) == counts.kept
    assert len({(row["prompt"], row["completion"]) for row in rows}) == len(rows)
    assert filter_data(data, row_check(tmp_path)).dropped == 0


@pytest.mark.parametrize("name", ["filter", "light"])
def test_the_filter_and_light_run_as_scripted_agents_without_llm_or_playbook(name: str) -> None:
    agent = get_agent(name)
    assert not agent.needs_gateway and not agent.needs_playbook
    context = AgentContext(task="arith", seed=3, budget_minutes=1.0, prompt="")
    assert agent.command(context)[-4:] == ["-m", f"vtbench.agents.{name}_agent", "--seed", "3"]
