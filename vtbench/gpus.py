"""The host's GPUs and who holds each: one allocator per host (per private store).

An episode's research sandbox gets the GPUs its task asks for (``resources.gpus``), the
grader evaluates on GPUs of its own (``vtbench grader serve --gpus N``), and two holders
never share a GPU: each GPU is held through an exclusive ``flock`` on
``$VTBENCH_HOME/gpus/<index>.lock``, which the kernel drops when the holder's process dies,
so a runner killed with ``kill -9`` leaves no GPU taken. The lock file names its holder
for ``vtbench gpus``.

Indexes are ``nvidia-smi``'s, in PCI bus order; sandboxes given GPUs also get
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that CUDA counts the same way. ``$VTBENCH_GPUS`` (a
comma-separated list of indexes) restricts which of the host's GPUs vtbench may hand out,
e.g. to leave some to other work; empty means none.
"""

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from vtbench import layout
from vtbench.errors import VtbenchError

ALLOWED_ENV = "VTBENCH_GPUS"
MEMORY_FRACTION_ENV = "VTBENCH_GPU_MEMORY_FRACTION"
"""Set where a GPU is shared: the share of its memory each side's processes may take
(``torch.cuda.set_per_process_memory_fraction``)."""
SHARED_MEMORY_FRACTION = 0.5
"""Each side's share of a GPU the grader shares with an episode's research sandbox."""


class GpusUnavailable(VtbenchError):
    exit_code = 2


@dataclass(frozen=True)
class Gpu:
    index: int
    """``nvidia-smi``'s index (PCI bus order), the value ``CUDA_VISIBLE_DEVICES`` takes."""
    name: str


OUT_OF_MEMORY = ("torch.OutOfMemoryError", "CUDA out of memory")
"""What a PyTorch program prints when the GPU's memory ran out."""


def ran_out_of_memory(output: str) -> bool:
    """Whether a training's output says that it ran out of GPU memory."""
    return any(mark in output for mark in OUT_OF_MEMORY)


def parse_inventory(csv: str) -> list[Gpu]:
    """``nvidia-smi --query-gpu=index,name --format=csv,noheader`` output as GPUs."""
    gpus = []
    for line in csv.splitlines():
        index, _, name = line.partition(",")
        if index.strip().isdigit():
            gpus.append(Gpu(index=int(index), name=name.strip()))
    return gpus


def inventory() -> list[Gpu]:
    """Every NVIDIA GPU of the host (none without ``nvidia-smi``)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listed = subprocess.run([smi, "--query-gpu=index,name", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_inventory(listed)


def host_gpus() -> list[Gpu]:
    """The host's GPUs that vtbench may hand out (:data:`ALLOWED_ENV` restricts them)."""
    gpus = inventory()
    allowed = os.environ.get(ALLOWED_ENV)
    if allowed is None:
        return gpus
    wanted = {int(part) for part in allowed.split(",") if part.strip().isdigit()}
    return [gpu for gpu in gpus if gpu.index in wanted]


def locks_folder() -> Path:
    return layout.reservations_root() / "gpus"


class GpuAllocator:
    """Hands out whole GPUs of ``inventory`` (default: the host's) to one holder each."""

    def __init__(self, inventory: list[Gpu] | None = None) -> None:
        self.inventory = host_gpus() if inventory is None else inventory

    @contextmanager
    def hold(self, count: int, holder: str) -> Iterator[list[Gpu]]:
        """Hold ``count`` free GPUs for the duration of the block; refuse at once (one line
        saying how many are free) when there are not enough."""
        if count == 0:
            yield []
            return
        folder = locks_folder()
        folder.mkdir(parents=True, exist_ok=True)
        taken: list[tuple[Gpu, IO[str]]] = []
        try:
            for gpu in self.inventory:
                if len(taken) == count:
                    break
                handle = self._try_lock(folder / f"{gpu.index}.lock", holder)
                if handle is not None:
                    taken.append((gpu, handle))
            if len(taken) < count:
                raise GpusUnavailable(
                    f"{holder} needs {count} GPU(s); {len(taken)} of the host's "
                    f"{len(self.inventory)} are free",
                    hint="wait for a running episode or grader to end, or see: vtbench gpus")
            yield [gpu for gpu, _ in taken]
        finally:
            for _, handle in taken:
                handle.close()  # closing drops the lock

    @staticmethod
    def _try_lock(path: Path, holder: str) -> IO[str] | None:
        handle = path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{holder} (pid {os.getpid()})\n")
        handle.flush()
        return handle

    def holders(self) -> dict[int, str | None]:
        """Each GPU's holder, None where free (for ``vtbench gpus``)."""
        return {gpu.index: _holder(locks_folder() / f"{gpu.index}.lock")
                for gpu in self.inventory}


def _holder(path: Path) -> str | None:
    if not path.exists():
        return None
    with path.open() as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "unknown"
    return None


def episode_gpu_count(required: int, optional: int) -> int:
    """GPUs an episode's research sandbox holds: the ``required`` ones, else as many of the
    ``optional`` ones as the host may hand out (none on a host without GPUs)."""
    return required or min(optional, len(host_gpus()))


def grader_shares_gpus() -> bool:
    """Whether a grader started for episodes shares its GPU with them: on a host with one
    GPU, an episode that trains on it and the grader that evaluates on it must share."""
    return len(host_gpus()) == 1


SIDE_BY_SIDE_MEMORY = 0.9
"""The part of one GPU's memory that side-by-side jobs (prepare's trainings and
evaluations) split evenly between them; the rest stays to the driver and other work."""


def side_by_side_share(jobs: int) -> float | None:
    """The share of one GPU's memory each of ``jobs`` processes running side by side on it
    may take; None without a GPU (nothing to split) or for one job (it may take all)."""
    if jobs <= 1 or not host_gpus():
        return None
    return round(SIDE_BY_SIDE_MEMORY / jobs, 4)


@contextmanager
def side_by_side(jobs: int) -> Iterator[float | None]:
    """Within it, processes started by this one take at most
    :func:`side_by_side_share` of the GPU's memory each (unless a share is already set:
    this process's own is split no further)."""
    share = side_by_side_share(jobs)
    if share is None or MEMORY_FRACTION_ENV in os.environ:
        yield memory_share()
        return
    os.environ[MEMORY_FRACTION_ENV] = str(share)
    try:
        yield share
    finally:
        os.environ.pop(MEMORY_FRACTION_ENV, None)


def memory_share() -> float | None:
    """This process's share of its GPU's memory (:data:`MEMORY_FRACTION_ENV`), if any."""
    value = os.environ.get(MEMORY_FRACTION_ENV)
    return float(value) if value else None


def apply_memory_fraction() -> float | None:
    """In a process that uses CUDA: cap its share of the device's memory where
    :data:`MEMORY_FRACTION_ENV` says (the GPU is shared); returns the share."""
    fraction = memory_share()
    if fraction is None:
        return None
    import torch

    for device in range(torch.cuda.device_count()):
        torch.cuda.set_per_process_memory_fraction(fraction, device)
    return fraction
