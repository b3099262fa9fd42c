"""Every command TASK.md shows an agent is one the CLI accepts as written."""

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import run_cli
from vtbench import layout
from vtbench.tasks import load_task
from vtbench.workspace import task_markdown


def shown_commands() -> list[str]:
    task = load_task(layout.BUILTIN_TASKS / "arith")
    text = task_markdown(task, task.spec.budgets)
    commands = re.findall(r"`(vtbench [^`]+)`", text.replace("\n  ", " "))
    return [re.sub(r"(\w+)(\|\w+)+", r"\1", command) for command in commands]


def test_task_md_shows_the_commands_an_agent_needs() -> None:
    shown = {command.split()[1] for command in shown_commands()}
    assert {"status", "validate", "models", "merge", "submit"} <= shown


@pytest.mark.parametrize("command", shown_commands())
def test_a_command_shown_in_task_md_is_no_usage_error(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTBENCH_GRADER_SOCKET", str(tmp_path / "no-grader.sock"))
    monkeypatch.setenv("VTBENCH_TOKEN", "t")
    done = run_cli(*shlex.split(command)[1:])
    assert done.returncode != 2, done.stderr
