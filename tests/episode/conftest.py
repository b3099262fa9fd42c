"""A quickly prepared copy of arith in one private store per test module, and one grader
serving it, so that each episode test pays only for its own episode. arith is prepared
once per run, in a store each module copies (a store names no path of its own)."""

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import new_store
from vtbench import layout
from vtbench.episode.grader_process import running_grader
from vtbench.models.tiny import new_tiny_model, save_checkpoint
from vtbench.prepare import prepare_task
from vtbench.tasks import load_task


def quick_copy(root: Path, task_id: str = "arith") -> Path:
    """A copy of a built-in task that trains for a few steps on a random base, tiny splits."""
    tasks = root / "tasks"
    shutil.copytree(layout.BUILTIN_TASKS / task_id, tasks / task_id)
    shutil.copytree(layout.BUILTIN_TASKS / "_tiny", tasks / "_tiny")
    base = root / "base"
    save_checkpoint(new_tiny_model(seed=1), base)
    toml = tasks / task_id / "task.toml"
    text = toml.read_text().replace('base_model = "tiny"', f'base_model = "{base}"')
    text = text.replace("val = 200", "val = 4").replace("test = 400", "test = 4")
    toml.write_text(text.replace("memory_gb = 4",
                                 "memory_gb = 4\nmax_file_gb = 0.0625\ndisk_gb = 0.25"))
    substitute(tasks / "_tiny" / "trainer" / "config.toml", r"^steps = \d+", "steps = 2")
    substitute(tasks / task_id / "reference.py", r"steps=\d+", "steps=3")
    return tasks / task_id


def substitute(path: Path, pattern: str, replacement: str) -> None:
    """Rewrite ``pattern`` in ``path``; fails when it is not there (a silent no-op would
    leave a test training for the full number of steps)."""
    text, count = re.subn(pattern, replacement, path.read_text(), flags=re.M)
    assert count, f"{pattern!r} not found in {path}"
    path.write_text(text)


@pytest.fixture(scope="session")
def arith_template(tmp_path_factory: pytest.TempPathFactory,
                   installation: Path) -> tuple[Path, Path]:
    """(store, task folder): the quick copy of arith, prepared once per run."""
    home = new_store(tmp_path_factory.mktemp("arith-template-home"), installation)
    task_dir = quick_copy(tmp_path_factory.mktemp("quick"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VTBENCH_HOME", str(home))
        prepare_task(load_task(task_dir))
    return home, task_dir


@pytest.fixture(scope="module")
def episode_home(tmp_path_factory: pytest.TempPathFactory,
                 installation: Path) -> Iterator[Path]:
    home = new_store(tmp_path_factory.mktemp("episode-home"), installation)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VTBENCH_HOME", str(home))
        yield home


@pytest.fixture(scope="module")
def prepared_arith(episode_home: Path, arith_template: tuple[Path, Path]) -> Path:
    """The quick copy of arith, prepared in the module's store (copied from the run's)."""
    store, task_dir = arith_template
    shutil.copytree(store / "tasks", episode_home / "tasks", symlinks=True, dirs_exist_ok=True)
    return task_dir


@pytest.fixture(scope="module")
def grader(prepared_arith: Path) -> Iterator[Path]:
    with running_grader() as socket:
        yield socket


@pytest.fixture
def private_store(episode_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Episode tests share their module's prepared store instead of a fresh one."""
    monkeypatch.setenv("VTBENCH_HOME", str(episode_home))
    return episode_home
