"""The host-level GPU allocator. This machine has no GPU: the inventory is passed in, or
comes from an ``nvidia-smi`` on PATH that prints what the real one prints on a host with
two H200s (the one thing here that cannot exist); the locks are real."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vtbench.gpus import (
    MEMORY_FRACTION_ENV,
    Gpu,
    GpuAllocator,
    GpusUnavailable,
    episode_gpu_count,
    host_gpus,
    parse_inventory,
    side_by_side,
    side_by_side_share,
)

TWO = [Gpu(0, "NVIDIA H200"), Gpu(1, "NVIDIA H200")]


def test_the_inventory_is_read_from_nvidia_smi_in_pci_order() -> None:
    assert parse_inventory("0, NVIDIA H200\n1, NVIDIA H200\n") == TWO


def test_two_holders_never_share_a_gpu_and_a_third_is_refused_until_one_leaves() -> None:
    allocator = GpuAllocator(TWO)
    with allocator.hold(1, "episode a") as first, allocator.hold(1, "episode b") as second:
        assert {first[0].index, second[0].index} == {0, 1}
        with pytest.raises(GpusUnavailable, match=r"needs 1 GPU.*0 of the host's 2 are free"), \
                allocator.hold(1, "episode c"):
            pass
        assert allocator.holders() == {first[0].index: f"episode a (pid {os.getpid()})",
                                       second[0].index: f"episode b (pid {os.getpid()})"}
    with allocator.hold(2, "grader") as both:
        assert [gpu.index for gpu in both] == [0, 1]
    assert allocator.holders() == {0: None, 1: None}


def test_a_request_that_cannot_be_met_takes_nothing() -> None:
    allocator = GpuAllocator(TWO)
    with allocator.hold(1, "grader"):
        with pytest.raises(GpusUnavailable), allocator.hold(2, "episode"):
            pass
        with allocator.hold(1, "episode") as one:
            assert len(one) == 1


def test_a_holder_killed_with_sigkill_leaves_its_gpus_free() -> None:
    script = ("import time\nfrom vtbench.gpus import Gpu, GpuAllocator\n"
              "with GpuAllocator([Gpu(0, 'x'), Gpu(1, 'x')]).hold(2, 'doomed'):\n"
              "    print('held', flush=True)\n    time.sleep(600)\n")
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert holder.stdout and holder.stdout.readline().strip() == "held"
    with pytest.raises(GpusUnavailable), GpuAllocator(TWO).hold(1, "episode"):
        pass
    holder.kill()
    holder.wait()
    with GpuAllocator(TWO).hold(2, "episode") as both:
        assert len(both) == 2


def test_vtbench_gpus_restricts_the_host_gpus_handed_out(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '0, NVIDIA H200\\n1, NVIDIA H200\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert host_gpus() == TWO
    monkeypatch.setenv("VTBENCH_GPUS", "1")
    assert host_gpus() == [Gpu(1, "NVIDIA H200")]
    monkeypatch.setenv("VTBENCH_GPUS", "")
    assert host_gpus() == []


def test_a_host_without_nvidia_smi_has_no_gpus_and_zero_gpus_are_always_free(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert host_gpus() == []
    with GpuAllocator().hold(0, "cpu episode") as none:
        assert none == []


@pytest.mark.parametrize(("listed", "required", "optional", "held"), [
    (0, 0, 1, 0), (1, 0, 1, 1), (2, 0, 1, 1), (2, 2, 0, 2), (0, 0, 0, 0)])
def test_optional_gpus_are_held_where_the_host_has_them_and_required_ones_always(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listed: int, required: int,
        optional: int, held: int) -> None:
    smi = tmp_path / "nvidia-smi"
    lines = "".join(f"{index}, NVIDIA H200\\n" for index in range(listed))
    smi.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert episode_gpu_count(required, optional) == held


def test_side_by_side_jobs_split_the_gpu_memory_evenly_and_restore_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '0, NVIDIA H200\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.delenv(MEMORY_FRACTION_ENV, raising=False)
    with side_by_side(6) as share:
        assert share == 0.15
        child = subprocess.run([sys.executable, "-c", "import os; print(os.environ["
                                f"{MEMORY_FRACTION_ENV!r}])"], capture_output=True, text=True)
        assert child.stdout.strip() == "0.15"
    assert MEMORY_FRACTION_ENV not in os.environ
    with side_by_side(1) as alone:
        assert alone is None and MEMORY_FRACTION_ENV not in os.environ


def test_a_process_with_its_own_share_splits_it_no_further_and_a_cpu_host_has_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_FRACTION_ENV, "0.5")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '0, NVIDIA H200\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with side_by_side(4) as share:
        assert share == 0.5 and os.environ[MEMORY_FRACTION_ENV] == "0.5"
    monkeypatch.setenv("PATH", "/nonexistent")
    assert side_by_side_share(4) is None
