"""The tuner baseline's edit: only ``lr``, ``steps``, ``schedule`` and ``warmup_steps`` of
the trainer's config change, comments and every other line stay; its first candidate is the
usual recipe; and every tiny task's trainer has a config it can tune."""

import shutil
import tomllib
from pathlib import Path

import pytest

from vtbench import layout
from vtbench.agents import AgentContext, get_agent
from vtbench.agents.tuner_agent import (
    TUNED,
    hyperparameters,
    recipe,
    set_hyperparameters,
    with_steps,
)
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
    settings = {"lr": 0.003, "steps": 600, "schedule": "cosine", "warmup_steps": 30}
    set_hyperparameters(config, settings)
    changes = changed_lines(before, config.read_text())
    assert [new for _, new in changes] == [
        "steps = 600", "lr = 0.003", 'schedule = "cosine"   # "constant" or "cosine"',
        "warmup_steps = 30"]
    assert hyperparameters(config) == settings
    untouched = {k: v for k, v in tomllib.loads(before).items() if k not in TUNED}
    assert {k: v for k, v in tomllib.loads(config.read_text()).items()
            if k not in TUNED} == untouched


def test_a_tuned_key_the_config_lacks_is_added_and_no_other_key_is_written(
        tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("steps = 10\nlr = 1e-3\n")
    set_hyperparameters(config, {"schedule": "constant"})
    assert config.read_text() == 'steps = 10\nlr = 1e-3\nschedule = "constant"\n'
    assert hyperparameters(config) == {"steps": 10, "lr": 1e-3, "schedule": "constant",
                                       "warmup_steps": 0}
    with pytest.raises(ValueError, match="batch_size"):
        set_hyperparameters(config, {"batch_size": 64})
    assert "batch_size" not in config.read_text()


def test_the_first_candidate_doubles_the_steps_with_cosine_decay_and_a_warm_up() -> None:
    shipped = hyperparameters(SHIPPED)
    assert recipe(shipped) == {**shipped, "steps": 2 * shipped["steps"], "schedule": "cosine",
                               "warmup_steps": round(0.05 * 2 * shipped["steps"])}
    assert with_steps(recipe(shipped), 900) == {**recipe(shipped), "steps": 900,
                                                "warmup_steps": 45}
    assert set(recipe({"lr": 1.0, "steps": 2, "schedule": "constant", "warmup_steps": 0})) \
        == set(TUNED)


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
