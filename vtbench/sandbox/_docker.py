"""The optional ``docker`` backend: the bwrap policy expressed as ``docker run`` flags.

Equivalences: ``--network none`` (loopback only), ``--user`` the sandbox uid,
``--cap-drop ALL`` and ``no-new-privileges``, ``--read-only`` root with size-limited
tmpfs at /tmp and /dev/shm, host /usr and the same small /etc subset bound read-only at
the same paths (so the host's Python runtime works unchanged on top of a minimal base
image), generated passwd/group/hosts, ``--pids-limit``/``--memory`` for the tree and
``--ulimit`` for the per-process limits, ``--gpus`` for the GPU selection. The
environment is passed by name (``--env NAME``) so values never appear on a command line.
The tree kill is ``docker kill`` (TERM, then KILL). The base image defaults to
``debian:stable-slim`` (``VTBENCH_DOCKER_IMAGE`` overrides); it must exist locally.

Constructing :class:`DockerSandbox` checks that a daemon answers and raises a one-line
:class:`SandboxUnavailable` naming the fix when none does.
"""

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from vtbench.errors import SandboxUnavailable
from vtbench.sandbox import _launch
from vtbench.sandbox._bwrap import _ETC, _TOP, _identity_files, wait_for_sockets
from vtbench.sandbox._process import RunsToCompletion, SandboxProcess, Stream
from vtbench.sandbox._relay import relay_argv, relay_socket_path
from vtbench.sandbox._spec import SandboxSpec

_FIX = "start the Docker daemon (and check DOCKER_HOST), or use the bwrap backend"


def _docker_cli() -> str:
    found = shutil.which("docker")
    if found is None:
        raise SandboxUnavailable("no Docker daemon is reachable: the docker CLI is not installed",
                                 hint=_FIX)
    probe = subprocess.run([found, "version", "--format", "{{.Server.Version}}"],
                           capture_output=True, timeout=15, check=False)
    if probe.returncode != 0 or not probe.stdout.strip():
        raise SandboxUnavailable("no Docker daemon is reachable", hint=_FIX)
    return found


class _ContainerKiller:
    def __init__(self, docker: str, name: str, files: Path) -> None:
        self._docker, self._name, self._files = docker, name, files

    def _kill(self, signal_name: str) -> None:
        subprocess.run([self._docker, "kill", "--signal", signal_name, self._name],
                       capture_output=True, timeout=30, check=False)

    def terminate_all(self) -> None:
        self._kill("TERM")

    def kill_all(self) -> None:
        self._kill("KILL")
        shutil.rmtree(self._files, ignore_errors=True)


def _limit_flags(spec: SandboxSpec) -> list[str]:
    limits = spec.limits
    flags = ["--ulimit", "core=0"]
    if limits.cpu_seconds is not None:
        flags += ["--ulimit", f"cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}"]
    if limits.file_size_mb is not None:
        size = limits.file_size_mb * 1024 * 1024
        flags += ["--ulimit", f"fsize={size}:{size}"]
    if limits.open_files is not None:
        flags += ["--ulimit", f"nofile={limits.open_files}:{limits.open_files}"]
    if limits.pids is not None:
        flags += ["--pids-limit", str(limits.pids)]
    if limits.memory_mb is not None:
        flags += ["--memory", f"{limits.memory_mb}m", "--memory-swap", f"{limits.memory_mb}m"]
    tmp = f"rw,nosuid,nodev,size={limits.tmp_mb}m,mode=1777"
    return [*flags, "--tmpfs", f"/tmp:{tmp}", "--tmpfs", f"/dev/shm:{tmp}"]


def _mount_flags(spec: SandboxSpec, files: Path, uid: int, gid: int) -> list[str]:
    def bind(source: Path | str, target: Path | str, writable: bool = False) -> list[str]:
        ro = "" if writable else ",readonly"
        return ["--mount", f"type=bind,source={source},target={target}{ro}"]

    flags = bind("/usr", "/usr")
    for top in _TOP:
        if os.path.isdir(f"/{top}") and not os.path.islink(f"/{top}"):
            flags += bind(f"/{top}", f"/{top}")
    for name in _ETC:
        if os.path.exists(f"/etc/{name}"):
            flags += bind(f"/etc/{name}", f"/etc/{name}")
    identity = _launch.Identity(uid, gid, _launch.SANDBOX_USER, drop=False)
    for target, content in _identity_files(identity, spec.hostname).items():
        (files / Path(target).name).write_bytes(content)
        flags += bind(files / Path(target).name, target)
    for mount in spec.mounts:
        flags += bind(mount.source, mount.target, mount.writable)
    for inside, host in spec.unix_sockets.items():
        flags += bind(host, inside, writable=True)
    for port, host in spec.tcp_relays.items():
        flags += bind(host, relay_socket_path(port), writable=True)
    return flags


class DockerSandbox(RunsToCompletion):
    """Runs commands in a throwaway container (see the module docstring)."""

    name = "docker"

    def __init__(self, image: str | None = None) -> None:
        self.docker = _docker_cli()
        self.image = image or os.environ.get("VTBENCH_DOCKER_IMAGE", "debian:stable-slim")

    def start(
        self, argv: list[str], spec: SandboxSpec,
        stdin: Stream = None, stdout: Stream = None, stderr: Stream = None,
    ) -> SandboxProcess:
        identity = _launch.sandbox_identity()
        wait_for_sockets(spec)
        name = f"vtbench-sbx-{uuid.uuid4().hex[:12]}"
        files = Path(tempfile.mkdtemp(prefix="vtbench-docker-"))
        os.chmod(files, 0o755)
        env = spec.command_env()
        flags = [
            "run", "--rm", "-i", "--name", name, "--network", "none",
            "--user", f"{identity.uid}:{identity.gid}", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--read-only", "--init",
            "--hostname", spec.hostname, "--workdir", str(spec.cwd),
            *_limit_flags(spec), *_mount_flags(spec, files, identity.uid, identity.gid),
        ]
        for variable in env:
            flags += ["--env", variable]
        if spec.gpus:
            flags += ["--gpus", '"device=' + ",".join(map(str, spec.gpus)) + '"']
        command = [self.docker, *flags, self.image, *relay_argv(spec.tcp_relays, argv)]
        client_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
        for key in ("DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT"):
            if key in os.environ:
                client_env[key] = os.environ[key]
        popen = subprocess.Popen(command, env=client_env, stdin=stdin, stdout=stdout,
                                 stderr=stderr, start_new_session=True)
        return SandboxProcess(popen, _ContainerKiller(self.docker, name, files), spec.limits)
