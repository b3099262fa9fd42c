"""What a sandboxed command may see and use (:class:`SandboxSpec`) and what a run returns.

The spec is a strict, frozen pydantic model: a typo in a field name fails loudly, and a
spec can be logged or stored as JSON. All paths must be absolute; host paths are never
resolved relative to the caller's working directory.
"""

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Ending = Literal["exited", "terminated", "killed"]
"""How a process ended: on its own, after SIGTERM within the grace period, or by SIGKILL."""

LimitName = Literal["wall_seconds", "cpu_seconds", "memory_mb", "pids", "file_size_mb"]

DEFAULT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _absolute(path: Path) -> Path:
    if not path.is_absolute():
        raise ValueError(f"{path} is not an absolute path")
    return path


class Mount(Strict):
    """One host path made visible inside the sandbox."""

    source: Path
    """Absolute host path (file or directory); it must exist when the sandbox starts."""
    target: Path
    """Absolute path inside the sandbox."""
    writable: bool = False
    """Read-only unless set. A writable mount must be writable by the sandbox uid on the
    host (see ``prepare_writable``); the sandbox cannot chmod its way around that."""

    @field_validator("source", "target")
    @classmethod
    def _paths_absolute(cls, value: Path) -> Path:
        return _absolute(value)


class Limits(Strict):
    """Resource limits of the whole sandboxed process tree (``None`` = no limit)."""

    wall_seconds: float | None = Field(None, gt=0)
    """Wall clock from start; enforced by the parent, which kills the whole tree."""
    cpu_seconds: int | None = Field(None, ge=1)
    """CPU time of the whole tree, every process it ever ran summed: read from the
    sandbox's cgroup (v1 ``cpuacct.usage``, v2 ``cpu.stat``) by the parent's watchdog,
    which kills the tree once it is used up; bwrap refuses a spec with it where no cgroup
    counts CPU time, unless weak limits are allowed (then it holds per process only). Each
    process is also held to it alone (RLIMIT_CPU: SIGXCPU, SIGKILL one second later)."""
    memory_mb: int | None = Field(None, ge=16)
    """Address space per process (RLIMIT_AS); also the memory of the whole tree (no swap
    on v2) through the sandbox's cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``)."""
    pids: int | None = Field(None, ge=4)
    """Most processes and threads: per sandbox through its cgroup's ``pids.max`` (v2 or
    v1); only with weak limits allowed, RLIMIT_NPROC of the sandbox uid (shared by its
    sandboxes)."""
    cpus: float | None = Field(None, gt=0)
    """CPU bandwidth of the whole tree in cores (v2 ``cpu.max``, v1 CFS quota), where the
    cpu controller is delegated; not enforced otherwise."""
    cores: list[int] | None = None
    """CPU cores (host numbering) the whole tree may run on: a cpuset cgroup of its own (v2
    or v1), which no process of the tree can leave; where the host has no cpuset controller,
    bwrap refuses unless weak limits are allowed, and then only the launcher's affinity
    holds (a process may widen it)."""
    file_size_mb: int | None = Field(None, ge=1)
    """Largest file a process may write (RLIMIT_FSIZE)."""
    open_files: int | None = Field(256, ge=16)
    """Most open file descriptors per process (RLIMIT_NOFILE)."""
    tmp_mb: int = Field(256, ge=1)
    """Size of the private tmpfs at /tmp (and of /dev/shm); it lives in memory."""


    @field_validator("cores")
    @classmethod
    def _cores_valid(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and (not value or min(value) < 0):
            raise ValueError("cores must name at least one core, each 0 or more")
        return sorted(set(value)) if value is not None else None


class SandboxSpec(Strict):
    """Everything a sandboxed command can see: nothing that is not named here."""

    mounts: list[Mount] = Field(default_factory=list)
    """Host paths visible inside, in order (a later mount may cover part of an earlier)."""
    env: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_ENV))
    """The exact environment of the command; nothing is inherited from the caller.
    ``CUDA_VISIBLE_DEVICES`` is added when ``gpus`` is set, and bwrap sets ``PWD``."""
    cwd: Path = Path("/tmp")
    """Working directory inside the sandbox."""
    limits: Limits = Limits()
    tcp_relays: dict[int, Path] = Field(default_factory=dict)
    """Inside, 127.0.0.1:PORT forwards each connection to this host unix socket (socat,
    started inside before the command). The socket must exist within ``socket_wait_seconds``
    and be connectable by the sandbox uid."""
    lazy_relays: bool = False
    """The ``tcp_relays`` sockets may appear after the start (a server starting alongside
    the command): each socket's *folder* is bound read-only in place of the socket, so
    that folder must hold nothing else the command may not see; ``start`` does not wait
    for these sockets; each relayed connection retries its connect every 10 ms for up to
    ``socket_wait_seconds`` (bytes the client sent meanwhile are kept)."""
    unix_sockets: dict[Path, Path] = Field(default_factory=dict)
    """Inside path -> host unix socket, bound into the sandbox (same waiting rule)."""
    socket_wait_seconds: float = Field(10.0, ge=0)
    """How long ``start`` waits for the sockets named above to appear on the host."""
    gpus: list[int] = Field(default_factory=list)
    """GPU indexes (nvidia-smi order) the command may use: sets CUDA_VISIBLE_DEVICES and
    binds the NVIDIA device nodes that exist on the host."""
    hostname: str = Field("sandbox", pattern=r"^[a-zA-Z0-9][a-zA-Z0-9.-]{0,62}$")

    @field_validator("cwd")
    @classmethod
    def _cwd_absolute(cls, value: Path) -> Path:
        return _absolute(value)

    @field_validator("tcp_relays")
    @classmethod
    def _ports_valid(cls, value: dict[int, Path]) -> dict[int, Path]:
        for port, socket in value.items():
            if not 1 <= port <= 65535:
                raise ValueError(f"relay port {port} is not in 1..65535")
            _absolute(socket)
        return value

    @field_validator("unix_sockets")
    @classmethod
    def _sockets_absolute(cls, value: dict[Path, Path]) -> dict[Path, Path]:
        for inside, host in value.items():
            _absolute(inside)
            _absolute(host)
        return value

    @model_validator(mode="after")
    def _lazy_socket_names_plain(self) -> "SandboxSpec":
        # The name ends up in a socat address, where "," ":" and "!" have a meaning.
        for socket in self.tcp_relays.values() if self.lazy_relays else ():
            if not re.fullmatch(r"[A-Za-z0-9._-]+", socket.name):
                raise ValueError(f"relay socket name {socket.name!r} must be letters, digits, "
                                 "'.', '_' or '-' with lazy_relays")
        return self

    @model_validator(mode="after")
    def _env_names_valid(self) -> "SandboxSpec":
        for name in self.env:
            if not name or "=" in name or "\0" in name:
                raise ValueError(f"invalid environment variable name {name!r}")
        return self

    def command_env(self) -> dict[str, str]:
        """The environment the command gets: ``env`` plus the GPU selection."""
        env = dict(self.env)
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in self.gpus)
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        return env


class CompletedRun(BaseModel):
    """The result of :meth:`Sandbox.run`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    returncode: int
    """Exit status; a command ended by signal N reports 128+N (bwrap) or -N (killed by
    the parent, e.g. at the wall-clock limit)."""
    stdout: bytes
    stderr: bytes
    wall_seconds: float
    timed_out: bool
    """The wall-clock limit ended the run."""
    killed_by_limit: LimitName | None
    """The limit that ended the run, where it can be told (wall clock, the tree's CPU
    budget or SIGXCPU, SIGXFSZ, a cgroup OOM kill, a failed exit after the cgroup refused
    a fork)."""
    ending: Ending
    output_truncated: bool = False
    """stdout or stderr exceeded ``max_output_bytes`` and was cut."""
    cpu_seconds: float | None = None
    """CPU time of every process the sandbox ran, where the backend counts it (the
    sandbox's cgroup, made where ``Limits.cpu_seconds`` is set); None where it does not."""
