"""The reference agent's playbook is the pack the episode runs, not a built-in namesake."""

from pathlib import Path

from tests.episode.conftest import quick_copy
from vtbench import layout
from vtbench.episode.sandbox import INSIDE_PLAYBOOK, playbook_mounts
from vtbench.tasks import load_task


def test_the_playbook_is_the_episode_s_own_pack_and_its_shared_sources(tmp_path: Path) -> None:
    task_dir = quick_copy(tmp_path)
    mounts, pack = playbook_mounts(load_task(task_dir))
    shared = (tmp_path / "tasks" / "_tiny").resolve()
    assert {(m.source, m.target) for m in mounts} == {
        (task_dir.resolve(), INSIDE_PLAYBOOK / "arith"),
        (shared / "trainer", INSIDE_PLAYBOOK / "_tiny" / "trainer"),
        (shared / "harness", INSIDE_PLAYBOOK / "_tiny" / "harness"),
    }
    assert pack == INSIDE_PLAYBOOK / "arith"
    assert not any(m.source.is_relative_to(layout.BUILTIN_TASKS) for m in mounts)
