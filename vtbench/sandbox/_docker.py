"""The optional ``docker`` backend: the bwrap policy expressed as ``docker run`` flags.

Equivalences with bwrap (see ``_bwrap``):

- network: ``--network none`` (a fresh loopback, no route); identity: ``--user`` the
  sandbox uid (vtbench-sbx for a root caller, the caller otherwise), ``--cap-drop ALL``,
  ``no-new-privileges``, Docker's default seccomp profile on top;
- filesystem: a ``--read-only`` root (the base image below) with host /usr and the host's
  real top-level library directories bound read-only at the same paths (so the host's
  Python runtime runs unchanged), the same small /etc subset, a generated
  passwd/group/hosts/hostname and an empty resolv.conf, size-limited tmpfs (exec
  allowed) at /tmp and /dev/shm, an empty read-only /sys, a private cgroup namespace,
  then the spec's mounts, sockets and relays; GPU device nodes by ``--device``;
- limits: ``--pids-limit``, ``--memory``, ``--cpus`` and ``--cpuset-cpus`` for the whole
  tree (cgroups), the per-process rlimits with the same ``prlimit`` as bwrap, run inside
  the container; ``cpu_seconds`` for the whole tree too, read from the container's cgroup
  (v1 cpuacct, v2 cpu.stat) as found from the host; where it cannot be found the start is
  refused unless weak limits are allowed;
- environment: exactly the spec's (values passed by name, ``--env NAME``, so they never
  appear on a command line; the variables Docker adds itself are removed with
  ``env -u``); names starting with ``DOCKER_`` are refused (the CLI would read them);
- lifetime: ``start`` returns once the command runs in the container (a FIFO the
  container writes on its first instruction); ``--init`` reaps zombies; the tree kill
  signals every process of the container's cgroup from the host (TERM, then KILL; KILL
  of the container's pid 1 ends the whole pid namespace), so a command that ignores
  SIGTERM, double-forks or calls setsid dies too, and so does everything left behind
  when the command exits; ``--rm`` removes the container and ``docker rm -f`` follows
  when the client did not end normally; ``--log-driver none`` keeps no output on disk;
- parent death: a small watcher process holds a pipe from the caller; when the caller
  dies without finishing the sandbox (even by SIGKILL) the pipe closes and the watcher
  removes the container. It follows the caller *process* (bwrap follows the thread).

Base image: ``vtbench-sandbox-base:<hash>``, built offline on first use (see
``_docker_image``). ``VTBENCH_DOCKER_IMAGE`` names another local image instead; it must
exist locally and must have a real ``/sbin`` directory (Docker mounts its init at
``/sbin/docker-init``), so images whose ``/sbin`` links into ``/usr`` do not work. Host
programs under a non-merged host's ``/sbin`` are not visible (use ``/usr/sbin``).

Not equivalent: ``killed_by_limit`` cannot tell a cgroup OOM kill or a refused fork
apart (the container and its cgroup are gone when the client returns); starting takes a
few hundred milliseconds (bench/sandbox_start.py). The daemon must run on this host:
host paths are bound by name.

Constructing :class:`DockerSandbox` checks that a daemon answers and raises a one-line
:class:`SandboxUnavailable` naming the fix when none does.
"""

import contextlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from vtbench.errors import SandboxError, SandboxUnavailable
from vtbench.sandbox import _cgroup, _launch
from vtbench.sandbox._bwrap import _ETC, _TOP, _identity_files, wait_for_sockets
from vtbench.sandbox._docker_image import base_image, image_exists
from vtbench.sandbox._process import RunsToCompletion, SandboxProcess, Stream
from vtbench.sandbox._relay import RELAY_DIR, relay_argv, relay_bind, relay_wait
from vtbench.sandbox._spec import SandboxSpec

LABEL = "vtbench.sandbox=1"
"""Every sandbox container carries it: ``docker ps -a --filter label=vtbench.sandbox``."""
_FIX = "start the Docker daemon (and check DOCKER_HOST), or use the bwrap backend"
_STARTED = RELAY_DIR / "started"
_READY_SECONDS = 30.0
_REMOVE_SECONDS = 10.0
_ADDED_BY_DOCKER = ("HOSTNAME", "HOME", "PATH")
_READY_SCRIPT = '{ echo > "$0"; } 2>/dev/null; exec "$@"'
# $1 docker, $2 container name, $3 client pid, $4 the sandbox's host files. Waits for a
# line on stdin: "done" from the caller, or EOF when the caller died; then removes the
# container until the client is gone, and the files the caller can no longer remove.
_WATCH_SCRIPT = r"""
read line
[ "$line" = done ] && exit 0
tries=0
while [ "$tries" -lt 300 ]; do
  "$1" rm -f "$2" >/dev/null 2>&1
  kill -0 "$3" 2>/dev/null || break
  tries=$((tries+1)); sleep 0.1
done
rm -rf "$4"
"""


def _docker_cli() -> str:
    found = shutil.which("docker")
    if found is None:
        raise SandboxUnavailable("no Docker daemon is reachable: the docker CLI is not installed",
                                 hint=_FIX)
    probe = subprocess.run([found, "version", "--format", "{{.Server.Version}}"],
                           capture_output=True, timeout=15, check=False)
    if probe.returncode == 0 and probe.stdout.strip():
        return found
    said = probe.stderr.decode(errors="replace").strip().splitlines()
    if not said or "Cannot connect to the Docker daemon" in said[-1]:
        raise SandboxUnavailable("no Docker daemon is reachable", hint=_FIX)
    # A daemon answered, but wrongly (API version, permissions): not "no daemon".
    raise SandboxUnavailable(f"the Docker daemon answered with an error: {said[-1]}",
                             hint="fix the daemon or the docker CLI, or use the bwrap backend")


class _Container:
    """The tree kill of one container: its processes are found through their cgroup."""

    def __init__(self, docker: str, name: str, files: Path, env: dict[str, str]) -> None:
        self._docker, self._name, self._env = docker, name, env
        self.cidfile = files / "cid"
        self.client: subprocess.Popen[bytes] | None = None

    def cpu_clock(self) -> Callable[[], float | None] | None:
        """The CPU time of the container's whole tree (its cgroup), None where this host's
        cgroup mounts do not show it."""
        for pid in self._pids():
            clock = _cgroup.clock_of(pid)
            if clock is not None:
                return clock.seconds
        return None

    def running(self) -> bool:
        return bool(self._pids())

    def _pids(self) -> list[int]:
        try:
            container_id = self.cidfile.read_text().strip()
        except OSError:
            return []
        if len(container_id) < 12:
            return []
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if container_id in Path(f"/proc/{entry}/cgroup").read_text():
                        pids.append(int(entry))
                except OSError:
                    continue
        return pids

    def _signal_all(self, number: int) -> None:
        for pid in self._pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, number)

    def terminate_all(self) -> None:
        self._signal_all(signal.SIGTERM)

    def _ended_on_its_own(self) -> bool:
        """The client returned the command's status: it waited for --rm, so neither the
        container nor any of its processes is left."""
        code = None if self.client is None else self.client.poll()
        return code is not None and code >= 0 and code != 125

    def kill_all(self) -> None:
        if self._ended_on_its_own():
            return
        pids = self._pids()
        for pid in pids:  # KILL of pid 1 ends the whole pid namespace
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if pids and self.client is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.client.wait(_REMOVE_SECONDS)  # returns once --rm removed it
        if not self._ended_on_its_own():
            self._remove()

    def _remove(self) -> None:
        # --rm may be removing it already ("removal ... in progress"): until it is gone.
        deadline = time.monotonic() + _REMOVE_SECONDS
        while True:
            removed = subprocess.run([self._docker, "rm", "-f", self._name], env=self._env,
                                     capture_output=True, timeout=60, check=False)
            if removed.returncode == 0 or b"No such container" in removed.stderr:
                return
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)


def _bind(source: Path | str, target: Path | str, writable: bool = False) -> list[str]:
    if not os.path.lexists(source):
        raise SandboxError(f"mount source {source} does not exist")
    # --mount is CSV: quote the fields that hold paths.
    fields = [f"source={source}", f"target={target}"]
    quoted = ",".join('"' + field.replace('"', '""') + '"' for field in fields)
    return ["--mount", f"type=bind,{quoted}" + ("" if writable else ",readonly")]


def _limit_flags(spec: SandboxSpec) -> list[str]:
    limits = spec.limits
    flags = []
    if limits.pids is not None:
        flags += ["--pids-limit", str(limits.pids)]
    if limits.memory_mb is not None:
        flags += ["--memory", f"{limits.memory_mb}m"]
    if limits.cpus is not None:
        flags += ["--cpus", str(limits.cpus)]
    if limits.cores is not None:
        flags += ["--cpuset-cpus", ",".join(str(core) for core in limits.cores)]
    tmp = f"rw,exec,nosuid,nodev,size={limits.tmp_mb}m,mode=1777"
    return [*flags, "--tmpfs", f"/tmp:{tmp}", "--tmpfs", f"/dev/shm:{tmp}",
            "--tmpfs", "/sys:ro,nosuid,nodev,noexec,size=4k,mode=0555"]


def _mount_flags(spec: SandboxSpec, files: Path, identity: _launch.Identity) -> list[str]:
    flags = _bind("/usr", "/usr")
    for top in _TOP:
        # The image has /sbin as a directory for Docker's init: host sbin stays under /usr.
        if top != "sbin" and os.path.isdir(f"/{top}") and not os.path.islink(f"/{top}"):
            flags += _bind(f"/{top}", f"/{top}")
    for name in _ETC:
        if os.path.exists(f"/etc/{name}"):
            flags += _bind(f"/etc/{name}", f"/etc/{name}")
    generated = {**_identity_files(identity, spec.hostname), "/etc/resolv.conf": b""}
    for target, content in generated.items():
        (files / Path(target).name).write_bytes(content)
        flags += _bind(files / Path(target).name, target)
    flags += _bind(files / "started", _STARTED, writable=True)
    for mount in spec.mounts:
        flags += _bind(mount.source, mount.target, mount.writable)
    for inside, host in spec.unix_sockets.items():
        flags += _bind(host, inside, writable=True)
    for port, host in spec.tcp_relays.items():
        bound, inside_path = relay_bind(port, host, spec.lazy_relays)
        flags += _bind(bound, inside_path, writable=not spec.lazy_relays)
    if spec.gpus:
        for node in sorted(Path("/dev").glob("nvidia*")):
            flags += ["--device", str(node)]
    return flags


def _inner_argv(argv: list[str], spec: SandboxSpec, env: dict[str, str]) -> list[str]:
    """Signal the start, drop what Docker added to the environment, set the per-process
    rlimits, start the relays, then run ``argv``."""
    unset = [arg for name in _ADDED_BY_DOCKER if name not in env for arg in ("-u", name)]
    rlimits = _launch.rlimit_args(spec.limits, nproc=False)
    return ["/bin/sh", "-c", _READY_SCRIPT, str(_STARTED),
            _launch.tool("env"), *unset, _launch.tool("prlimit"), *rlimits, "--",
            *relay_argv(spec.tcp_relays, argv, lazy_seconds=relay_wait(spec))]


def _wait_started(fifo: int, client: subprocess.Popen[bytes], timeout: float) -> None:
    """Until the container's first instruction wrote to the FIFO, or the client ended.
    The FIFO stays open (closed by the cleanup), so a late writer never blocks."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and client.poll() is None:
        ready, _, _ = select.select([fifo], [], [], 0.02)
        if ready:
            return


class DockerSandbox(RunsToCompletion):
    """Runs commands in a throwaway container (see the module docstring)."""

    name = "docker"

    def __init__(self, image: str | None = None) -> None:
        self.docker = _docker_cli()
        self.client_env = {key: value for key, value in os.environ.items()
                           if key.startswith("DOCKER_") or key in ("PATH", "HOME")}
        custom = image or os.environ.get("VTBENCH_DOCKER_IMAGE")
        if custom is None:
            self.image = base_image(self.docker)
        elif image_exists(self.docker, custom):
            self.image = custom
        else:
            raise SandboxUnavailable(
                f"the Docker image {custom} is not present on the daemon",
                hint="load it (docker load / docker import), or unset VTBENCH_DOCKER_IMAGE "
                     "to use the built-in vtbench-sandbox-base")

    def start(
        self, argv: list[str], spec: SandboxSpec,
        stdin: Stream = None, stdout: Stream = None, stderr: Stream = None,
    ) -> SandboxProcess:
        if not argv:
            raise SandboxError("no command to run")
        env = spec.command_env()
        refused = sorted(name for name in env if name.startswith("DOCKER_"))
        if refused:
            raise SandboxError(f"the docker backend cannot pass {refused[0]} into a sandbox",
                               hint="rename the variable or use the bwrap backend")
        identity = _launch.sandbox_identity()
        wait_for_sockets(spec)
        files = Path(tempfile.mkdtemp(prefix="vtbench-docker-"))
        try:
            return self._start(argv, spec, env, identity, files, (stdin, stdout, stderr))
        except BaseException:
            shutil.rmtree(files, ignore_errors=True)
            raise

    def _start(self, argv: list[str], spec: SandboxSpec, env: dict[str, str],
               identity: _launch.Identity, files: Path,
               streams: tuple[Stream, Stream, Stream]) -> SandboxProcess:
        name = f"vtbench-sbx-{uuid.uuid4().hex[:12]}"
        os.mkfifo(files / "started", 0o600)
        os.chown(files / "started", identity.uid, identity.gid)
        (files / "config").mkdir()  # DOCKER_CONFIG: no host CLI config applies
        flags = [
            "run", "--rm", "-i", "--name", name, "--cidfile", str(files / "cid"),
            "--label", LABEL,
            "--network", "none", "--user", f"{identity.uid}:{identity.gid}",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only",
            "--init", "--cgroupns", "private", "--log-driver", "none",
            "--hostname", spec.hostname, "--workdir", str(spec.cwd),
            *_limit_flags(spec), *_mount_flags(spec, files, identity),
        ]
        for variable in env:
            flags += ["--env", variable]
        command = [self.docker, *flags, self.image, *_inner_argv(argv, spec, env)]
        client_env = {"DOCKER_CONFIG": str(files / "config"), **self.client_env}
        container = _Container(self.docker, name, files, client_env)
        fifo = os.open(files / "started", os.O_RDONLY | os.O_NONBLOCK)
        try:
            client = subprocess.Popen(command, env={**client_env, **env}, stdin=streams[0],
                                      stdout=streams[1], stderr=streams[2],
                                      start_new_session=True)
        except BaseException:
            os.close(fifo)
            raise
        container.client = client
        try:
            watcher = subprocess.Popen(
                ["/bin/sh", "-c", _WATCH_SCRIPT, "vtbench-docker-watch", self.docker, name,
                 str(client.pid), str(files)], env=client_env, stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            _wait_started(fifo, client, _READY_SECONDS)
            clock = _tree_clock(container, spec)
        except BaseException:
            client.kill()
            client.wait()
            container.kill_all()
            os.close(fifo)
            raise
        return SandboxProcess(client, container, spec.limits,
                              cleanup=_cleanup(watcher, files, fifo), cpu_clock=clock)


def _tree_clock(container: _Container, spec: SandboxSpec) -> Callable[[], float | None] | None:
    """The container's CPU clock where the spec has a CPU budget; refuses without one
    (unless the command has already ended: nothing is left to limit)."""
    if spec.limits.cpu_seconds is None:
        return None
    clock = container.cpu_clock()
    if clock is None and container.running() and not _cgroup.weak_limits_allowed():
        raise SandboxUnavailable(
            "the container's cgroup does not show its CPU time here: no CPU budget for the "
            "whole tree", hint="run vtbench in the host's cgroup namespace, or pass "
                               "--allow-weak-limits")
    return clock


def _cleanup(watcher: subprocess.Popen[bytes], files: Path,
             fifo: int) -> Callable[[], str | None]:
    def cleanup() -> str | None:
        os.close(fifo)
        with contextlib.suppress(OSError):
            if watcher.stdin is not None:
                watcher.stdin.write(b"done\n")
                watcher.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            watcher.wait(5)
        shutil.rmtree(files, ignore_errors=True)
        return None

    return cleanup
