"""The filter and tuner baselines in real episodes on a copy of arith with 30-step
trainings: the attribution finds only the baseline's own component changed (data for the
filter, trainer for the tuner) and gives it at least 90 % of the gain where the gain is not
0. At this scale a baseline often submits the initial model (nothing beat it on val); the
full-size check is a run of the baseline campaign with ``attribute = true``."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.episode.conftest import substitute
from vtbench import layout
from vtbench.attribution import attribute
from vtbench.episode.grader_process import running_grader
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.prepare import prepare_task
from vtbench.tasks import load_task

pytestmark = pytest.mark.slow  # a preparation, two whole episodes and their attributions


@pytest.fixture(scope="module")
def learning_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture
def private_store(learning_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This module's tests share its prepared store."""
    monkeypatch.setenv("VTBENCH_HOME", str(learning_home))
    return learning_home


@pytest.fixture(scope="module")
def learning_arith(learning_home: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """arith on the released tiny base, 30 training steps, 40 val and 80 test items."""
    home = learning_home
    root = tmp_path_factory.mktemp("tasks")
    shutil.copytree(layout.BUILTIN_TASKS / "arith", root / "arith")
    shutil.copytree(layout.BUILTIN_TASKS / "_tiny", root / "_tiny")
    substitute(root / "arith" / "task.toml", r"^val = \d+", "val = 40")
    substitute(root / "arith" / "task.toml", r"^test = \d+", "test = 80")
    substitute(root / "_tiny" / "trainer" / "config.toml", r"^steps = \d+", "steps = 30")
    substitute(root / "arith" / "reference.py", r"steps=\d+", "steps=60")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VTBENCH_HOME", str(home))
        prepare_task(load_task(root / "arith"))
        with running_grader():
            yield root / "arith"


@pytest.mark.parametrize(("agent", "component"), [("filter", "data"), ("tuner", "trainer")])
def test_a_baseline_that_changes_one_component_has_its_gain_attributed_to_it(
        learning_arith: Path, tmp_path: Path, agent: str, component: str) -> None:
    record, path = run_episode(RunOptions(task=str(learning_arith), agent=agent, out=tmp_path,
                                          budget_minutes=12))
    assert record.submitted, (path.parent / "agent.log").read_text()
    result = attribute(path.parent)
    assert result.status == "attributed", result.reasons
    assert set(result.changed) <= {component}
    if record.submission and record.submission.candidate != "models/initial":
        assert result.changed == [component]
    if result.gain:
        assert getattr(result.shapley, component) / result.gain >= 0.9
