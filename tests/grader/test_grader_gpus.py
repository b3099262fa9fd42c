"""The grader's own GPUs. No GPU exists here: ``nvidia-smi`` on PATH prints what the real
one prints on a host with two H200s; the allocation is real."""

from pathlib import Path

import pytest

from vtbench.gpus import GpuAllocator, GpusUnavailable
from vtbench.grader.serve import evaluation_gpus


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\nprintf '0, NVIDIA H200\\n1, NVIDIA H200\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:/usr/bin:/bin")


def test_the_grader_holds_one_free_gpu_by_default_and_episodes_get_the_others(
        two_gpus: None) -> None:
    with evaluation_gpus(None, share=False) as held:
        assert [gpu.index for gpu in held] == [0]
        assert GpuAllocator().holders()[0].startswith("grader")
        with GpuAllocator().hold(1, "episode") as episode:
            assert [gpu.index for gpu in episode] == [1]
        with pytest.raises(GpusUnavailable), GpuAllocator().hold(2, "episode"):
            pass


def test_a_shared_grader_gpu_stays_free_for_an_episode(two_gpus: None) -> None:
    with evaluation_gpus(1, share=True) as held, GpuAllocator().hold(2, "episode") as episode:
        assert [gpu.index for gpu in held] == [0]
        assert len(episode) == 2

