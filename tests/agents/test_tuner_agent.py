"""The tuner baseline's edit: only ``lr``, ``steps`` and ``schedule`` of the trainer's
config change, comments and every other line stay; and every tiny task's trainer has a
config it can tune."""

import shutil
import tomllib
from pathlib import Path

import pytest

from vtbench import layout
from vtbench.agents import AgentContext, get_agent
from vtbench.agents.tuner_agent import TUNED, hyperparameters, set_hyperparameters
from vtbench.tasks import find_task

TINY_TASKS = ("arith", "extract", "toolcalc", "dsl")
SHIPPED = layout.BUILTIN_TASKS / "_tiny" / "trainer" / "config.toml"


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    assert len(before.splitlines()) == len(after.splitlines())
    return [(old, new) for old, new in zip(before.splitlines(), after.splitlines(),
                                           strict=True) if old != new]


def test_only_the_tuned_values_change_and_comments_stay(tmp_path: Path) -> None:
    config = Path(shutil.copy(SHIPPED, tmp_path / "config.toml"))
    before = config.read_text()
    set_hyperparameters(config, {"lr": 0.003, "steps": 600, "schedule": "cosine"})
    changes = changed_lines(before, config.read_text())
    assert [new for _, new in changes] == [
        "steps = 600", "lr = 0.003", 'schedule = "cosine"   # "constant" or "cosine"']
    assert hyperparameters(config) == {"lr": 0.003, "steps": 600, "schedule": "cosine"}
    untouched = {k: v for k, v in tomllib.loads(before).items() if k not in TUNED}
    assert {k: v for k, v in tomllib.loads(config.read_text()).items()
            if k not in TUNED} == untouched


def test_a_tuned_key_the_config_lacks_is_added_and_no_other_key_is_written(
        tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("steps = 10\nlr = 1e-3\n")
    set_hyperparameters(config, {"schedule": "constant"})
    assert config.read_text() == 'steps = 10\nlr = 1e-3\nschedule = "constant"\n'
    with pytest.raises(ValueError, match="batch_size"):
        set_hyperparameters(config, {"batch_size": 64})
    assert "batch_size" not in config.read_text()


@pytest.mark.parametrize("task", TINY_TASKS)
def test_every_tiny_task_trains_with_a_config_the_tuner_can_tune(task: str) -> None:
    pack = find_task(task)
    configs = [pack.root / source / "config.toml"
               for source in pack.spec.components.trainer.sources
               if (pack.root / source / "config.toml").exists()]
    assert configs, f"{task}: no trainer/config.toml"
    assert set(TUNED) <= set(tomllib.loads(configs[-1].read_text()))


def test_the_tuner_runs_as_a_scripted_agent_without_llm_or_playbook() -> None:
    agent = get_agent("tuner")
    assert not agent.needs_gateway and not agent.needs_playbook
    context = AgentContext(task="arith", seed=0, budget_minutes=1.0, prompt="")
    assert agent.command(context)[-4:] == ["-m", "vtbench.agents.tuner_agent", "--seed", "0"]
