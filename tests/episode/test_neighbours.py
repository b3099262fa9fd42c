"""An episode on its own reserved core does the same work whatever runs beside it.

The reference agent on arith (the real pre-trained tiny base; 20 validation and test items
and a fifth of the training steps, so that the two episodes take minutes, not half an
hour), seed 0, on a one-core reservation, once alone and once with a CPU hog busy on the
host's other core in a cgroup of its own: the same candidates validated in the same order,
scores within one instance of each other, the same submission. Slow: two whole episodes."""

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.episode.conftest import substitute
from vtbench import layout
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.prepare import prepare_task
from vtbench.reservation import ALLOWED_ENV, host_cores
from vtbench.sandbox import limit_groups, on_cores
from vtbench.tasks import load_task

HOG = "while True: pass"
ITEMS = 20


@pytest.fixture(scope="module")
def small_arith(episode_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """arith on its real base model, cut to 20 items a split and a fifth of its steps."""
    tasks = tmp_path_factory.mktemp("small") / "tasks"
    for name in ("arith", "_tiny"):
        shutil.copytree(layout.BUILTIN_TASKS / name, tasks / name)
    toml = tasks / "arith" / "task.toml"
    substitute(toml, r"^val = 200", f"val = {ITEMS}")
    substitute(toml, r"^test = 400", f"test = {ITEMS}")
    substitute(tasks / "_tiny" / "trainer" / "config.toml", r"^steps = \d+", "steps = 60")
    substitute(tasks / "arith" / "reference.py", r"steps=\d+", "steps=120")
    prepare_task(load_task(tasks / "arith"))
    return tasks / "arith"


@contextlib.contextmanager
def cpu_hog(core: int, processes: int = 2) -> Iterator[None]:
    """``processes`` busy loops on ``core``, in a cpuset group of their own (else pinned)."""
    group = limit_groups(None, None, cores=[core])
    join = "".join(f"echo $$ > {procs}; " for procs in group.procs_files if "cpuset" in
                   group.dirs)
    with on_cores([core]):
        hogs = [subprocess.Popen(["/bin/sh", "-c", f"{join}exec {sys.executable} -c '{HOG}'"])
                for _ in range(processes)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        group.remove()


def reference_episode(task: Path, out: Path) -> EpisodeRecord:
    record, _ = run_episode(RunOptions(task=str(task), agent="reference", seed=0, out=out,
                                       budget_minutes=10))
    return record


@pytest.mark.slow
def test_the_reference_agent_on_one_reserved_core_does_the_same_alone_and_beside_a_cpu_hog(
        small_arith: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cores = host_cores()
    if len(cores) < 2:
        pytest.skip(f"needs two cores, one for the episode and one for its neighbour: {cores}")
    mine, other = cores[-1], cores[0]
    monkeypatch.setenv(ALLOWED_ENV, str(mine))  # the episode's one core
    alone = reference_episode(small_arith, tmp_path / "alone")
    with cpu_hog(other):
        beside = reference_episode(small_arith, tmp_path / "beside")
    for record in (alone, beside):
        assert record.spec is not None and record.spec.reservation is not None
        assert record.spec.reservation.cores == [mine] and record.submitted
    one_instance = 1 / ITEMS
    assert [v.candidate for v in beside.validations] == [v.candidate for v in alone.validations]
    assert len(alone.validations) >= 2
    assert any(v.score for v in alone.validations), "every score 0: the test would show nothing"
    for first, second in zip(alone.validations, beside.validations, strict=True):
        assert first.score is not None and second.score is not None
        assert abs(first.score - second.score) <= one_instance + 1e-9
    assert alone.submission is not None and beside.submission is not None
    assert beside.submission.candidate == alone.submission.candidate
    assert beside.submission.model_hash == alone.submission.model_hash
