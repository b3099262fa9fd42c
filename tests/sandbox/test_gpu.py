"""A research sandbox on a GPU host: the GPUs the allocator hands out are the ones CUDA sees
inside, and none without them. Runs where ``nvidia-smi`` lists a GPU and torch has CUDA
(the GPU host); skipped elsewhere, saying so."""

import sys

import pytest

from vtbench.gpus import GpuAllocator, host_gpus
from vtbench.sandbox import SandboxSpec, get_sandbox, python_runtime_mounts

COUNT = "import torch; print(torch.cuda.device_count(), torch.cuda.is_available())"


@pytest.fixture
def gpu_host() -> None:
    torch = pytest.importorskip("torch")
    if not host_gpus() or not torch.cuda.is_available():
        pytest.skip("no GPU on this host (nvidia-smi lists none or torch has no CUDA)")


def cuda_inside(gpus: list[int]) -> str:
    spec = SandboxSpec(mounts=python_runtime_mounts(), env={"PATH": "/usr/bin:/bin"},
                       gpus=gpus)
    done = get_sandbox("bwrap").run([sys.executable, "-c", COUNT], spec)
    assert done.returncode == 0, done.stderr.decode()[-500:]
    return done.stdout.decode().strip()


def test_a_sandbox_sees_exactly_the_gpu_it_holds_and_none_without(gpu_host: None) -> None:
    with GpuAllocator().hold(1, "test episode") as held:
        assert cuda_inside([gpu.index for gpu in held]) == "1 True"
    assert cuda_inside([]) == "0 False"
