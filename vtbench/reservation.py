"""Host-level reservations of cores and GPUs: where each episode's work runs.

An episode holds a reservation for as long as its runner lives: ``resources.cpus`` cores of
the host, and its GPUs through the GPU allocator (:mod:`vtbench.gpus`). Its research sandbox
and the grader's evaluations of its candidates run on those cores (a cpuset), so one
episode's training never shares a core with another episode's validation.

A reservation of cores is a *claim*, the file ``reservations/<pid>-<hex>.json`` of the
private store (of ``$VTBENCH_RESERVATIONS`` where several stores share a host) naming its
holder, pid, cores and whether it is shared; the holder keeps the file under an exclusive
``flock``, which the kernel drops when the holder dies, so a runner killed with
``kill -9`` leaves no core taken: a claim whose lock can be had is stale and the next reader
removes it. Claims are made one at a time under ``allocate.lock``, so two runners never
pick the same free core.

An exclusive reservation (the default) takes cores that no other claim holds; a shared one
(``--shared``) takes cores that no exclusive claim holds, the least shared first, and its
results say "shared". A request that cannot be met waits up to ``wait_seconds`` for one,
then is refused in one line naming every taken core and its holder.

The host's cores are this process's (its affinity, within its cpuset), restricted by
``$VTBENCH_CPUS`` (a kernel core list, e.g. ``2-7``, to leave cores to other work).
"""

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from vtbench import layout
from vtbench.errors import VtbenchError
from vtbench.gpus import GpuAllocator, GpusUnavailable
from vtbench.sandbox import core_list, parse_core_list
from vtbench.spec import Reservation

ALLOWED_ENV = "VTBENCH_CPUS"
POLL_SECONDS = 1.0


class CoresTaken(VtbenchError):
    exit_code = 2


def host_cores() -> list[int]:
    """The cores vtbench may hand out: this process's, restricted by :data:`ALLOWED_ENV`."""
    cores = sorted(os.sched_getaffinity(0))
    allowed = os.environ.get(ALLOWED_ENV)
    if allowed is None:
        return cores
    wanted = set(parse_core_list(allowed))
    return [core for core in cores if core in wanted]


def claims_folder() -> Path:
    return layout.reservations_root() / "reservations"


@dataclass(frozen=True)
class Claim:
    """One live reservation of cores."""

    holder: str
    pid: int
    cores: tuple[int, ...]
    shared: bool

    def describe(self) -> str:
        return f"{self.holder} (pid {self.pid}{', shared' if self.shared else ''})"


class CoreAllocator:
    """Hands out cores of ``cores`` (default: the host's) to claims (see the module)."""

    def __init__(self, cores: list[int] | None = None, folder: Path | None = None) -> None:
        self.cores = host_cores() if cores is None else sorted(cores)
        self.folder = folder or claims_folder()

    def claims(self) -> list[Claim]:
        """Every live claim; stale ones (their holder died) are removed."""
        found = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            claim = _live_claim(path)
            if claim is not None:
                found.append(claim)
        return found

    @contextlib.contextmanager
    def hold(self, count: int, holder: str, shared: bool = False,
             exact: list[int] | None = None, wait_seconds: float = 0.0,
             on_wait: Callable[[str], None] | None = None) -> Iterator[list[int]]:
        """Hold ``count`` cores (``exact``: those) for the block; waits up to
        ``wait_seconds`` for them (``on_wait`` hears why, once), then refuses."""
        deadline, told = time.monotonic() + wait_seconds, False
        while True:
            taken = self._take(count, holder, shared, exact)
            if isinstance(taken, tuple):
                break
            never = count > len(self.cores) or not set(exact or []) <= set(self.cores)
            if never:
                raise CoresTaken(taken, hint="run it on a host with more cores "
                                 f"(${ALLOWED_ENV} restricts which ones vtbench may use)")
            if time.monotonic() >= deadline:
                raise CoresTaken(taken, hint="wait for those episodes to end, pass "
                                 "--wait-for-cores MINUTES, or run with --shared")
            if on_wait is not None and not told:
                on_wait(f"waiting for cores: {taken}")
                told = True
            time.sleep(POLL_SECONDS)
        handle, path, cores = taken
        try:
            yield cores
        finally:
            path.unlink(missing_ok=True)
            handle.close()  # closing drops the lock

    def _take(self, count: int, holder: str, shared: bool,
              exact: list[int] | None) -> tuple[IO[str], Path, list[int]] | str:
        """Claim the cores now, or say why not."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with (self.folder / "allocate.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            claims = self.claims()
            cores = self._choose(count, shared, exact, claims)
            if cores is None:
                return self._refusal(count, holder, exact, claims)
            return (*self._write(holder, cores, shared), cores)

    def _choose(self, count: int, shared: bool, exact: list[int] | None,
                claims: list[Claim]) -> list[int] | None:
        closed = {core for claim in claims for core in claim.cores
                  if not (shared and claim.shared)}
        sharers = {core: sum(core in claim.cores for claim in claims) for core in self.cores}
        if exact is not None:
            fits = set(exact) <= set(self.cores) and not set(exact) & closed
            return sorted(exact) if fits else None
        open_cores = sorted((core for core in self.cores if core not in closed),
                            key=lambda core: (sharers[core], core))
        return sorted(open_cores[:count]) if len(open_cores) >= count else None

    def _refusal(self, count: int, holder: str, exact: list[int] | None,
                 claims: list[Claim]) -> str:
        wanted = f"cores {core_list(exact)}" if exact is not None else f"{count} core(s)"
        held = [f"{core} by {claim.describe()}" for core in self.cores for claim in claims
                if core in claim.cores]
        outside = sorted(set(exact or []) - set(self.cores))
        return (f"{holder} needs {wanted}; of this host's cores {core_list(self.cores)}, "
                + ("; ".join(held) or "none is held")
                + (f"; cores {core_list(outside)} are not this host's to give" if outside
                   else ""))

    def _write(self, holder: str, cores: list[int], shared: bool) -> tuple[IO[str], Path]:
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        scratch = self.folder / f".{name}.tmp"
        handle = scratch.open("w")
        fcntl.flock(handle, fcntl.LOCK_EX)
        json.dump({"holder": holder, "pid": os.getpid(), "cores": cores, "shared": shared},
                  handle)
        handle.flush()
        path = self.folder / f"{name}.json"
        scratch.rename(path)  # whole and locked before anyone can read it
        return handle, path


def _live_claim(path: Path) -> Claim | None:
    try:
        handle = path.open()
    except FileNotFoundError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                data = json.loads(handle.read())
                return Claim(str(data["holder"]), int(data["pid"]),
                             tuple(int(core) for core in data["cores"]), bool(data["shared"]))
            except (ValueError, KeyError, TypeError):
                return None
        path.unlink(missing_ok=True)  # its holder is gone
    return None


@contextlib.contextmanager
def reserve(cores: int, gpus: int, holder: str, shared: bool = False,
            exact: Reservation | None = None, wait_seconds: float = 0.0,
            on_wait: Callable[[str], None] | None = None) -> Iterator[Reservation]:
    """Hold ``cores`` cores and ``gpus`` GPUs (``exact``: a reservation's own again, as a
    resumed episode needs) for the block; waits up to ``wait_seconds`` for both, then
    refuses naming what is taken and by whom."""
    allocator = CoreAllocator()
    deadline = time.monotonic() + wait_seconds
    while True:
        held = contextlib.ExitStack()
        try:
            left = max(0.0, deadline - time.monotonic())
            taken = held.enter_context(allocator.hold(
                cores, holder, shared, exact.cores if exact else None, left, on_wait))
            indexes = held.enter_context(_gpus(gpus, holder, exact))
        except GpusUnavailable:
            held.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(POLL_SECONDS)
            continue
        except BaseException:
            held.close()
            raise
        with held:
            yield Reservation(cores=taken, gpus=indexes, shared=shared)
        return


@contextlib.contextmanager
def _gpus(count: int, holder: str, exact: Reservation | None) -> Iterator[list[int]]:
    allocator = GpuAllocator()
    if exact is not None and exact.gpus:
        allocator = GpuAllocator([gpu for gpu in allocator.inventory if gpu.index in exact.gpus])
        count = len(exact.gpus)
    with allocator.hold(count, holder) as held:
        yield [gpu.index for gpu in held]
