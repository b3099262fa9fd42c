"""The default backend: bubblewrap, as an unprivileged uid, with no network.

Policy of every sandbox (whatever the spec says):
- all namespaces unshared (user, pid, net, ipc, uts, cgroup); the only network interface
  is a fresh loopback; nested user namespaces are disabled;
- runs as ``vtbench-sbx`` when the caller is root (dropped before bwrap), else as the
  caller; no capabilities, no_new_privs, a new session (no terminal injection);
- a fresh /proc of its own pid namespace (host processes are invisible), a minimal /dev,
  private size-limited tmpfs at /tmp and /dev/shm, a read-only root;
- read-only /usr (and /bin, /lib, /lib64, /sbin), a small /etc subset (loader, nsswitch,
  localtime, alternatives) with a generated passwd/group/hosts: no /etc/shadow, no host
  user list;
- only the spec's mounts, sockets and (when asked) NVIDIA device nodes;
- bwrap dies with its parent (the thread that started it) and its pid-1 reaper takes
  every process of the sandbox with it when the command ends.
"""

import contextlib
import glob
import json
import os
import select
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from vtbench.errors import SandboxError, SandboxUnavailable
from vtbench.sandbox import _cgroup, _launch, _tools
from vtbench.sandbox._affinity import on_cores
from vtbench.sandbox._process import RunsToCompletion, SandboxProcess, Stream
from vtbench.sandbox._relay import relay_argv, relay_bind, relay_wait
from vtbench.sandbox._spec import SandboxSpec

_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "localtime",
        "alternatives", "protocols", "services", "mime.types")
_TOP = ("bin", "sbin", "lib", "lib64", "lib32")
_LAUNCH_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
_READY_SECONDS = 30.0
"""How long ``start`` waits for the command to start in the sandbox (milliseconds, usually)."""

class _NamespaceKiller:
    """Signals every process of the sandbox's pid namespace, found through bwrap's
    ``--info-fd`` report (pid-1 of the namespace and the namespace inode)."""

    def __init__(self, info_fd: int, outer: subprocess.Popen[bytes],
                 cgroups: _cgroup.CgroupSet) -> None:
        self._info_fd: int | None = info_fd
        self._outer = outer
        self._cgroups = cgroups
        self._ns: tuple[int, int] | None = None

    def wait_ready(self, timeout: float) -> None:
        """Read bwrap's report. bwrap writes it right after binding its lifetime to its
        parent's, so once this returns a SIGKILL of the caller takes the sandbox with it;
        returns early when bwrap exits without a report."""
        if self._info_fd is None:
            return
        raw = b""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._info_fd], [], [], left)
            chunk = os.read(self._info_fd, 65536) if ready else b""
            raw += chunk
            if not chunk or self._parse(raw):
                break
        os.close(self._info_fd)
        self._info_fd = None

    def _parse(self, raw: bytes) -> bool:
        try:
            info = json.loads(raw)
            self._ns = (int(info["child-pid"]), int(info["pid-namespace"]))
        except (ValueError, KeyError):
            return False
        return True

    def wait_command(self, timeout: float) -> None:
        """Wait until the command runs in the sandbox: bwrap's pid-1 reaper binds its
        lifetime to bwrap's just after forking the command, so from then on the whole
        sandbox dies with the caller. Returns early when bwrap exits."""
        self.wait_ready(timeout)
        if self._ns is None:
            return
        launcher = _cmdline(self._outer.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._outer.poll() is None:
            members = [pid for pid in self._members() if pid != self._ns[0]]
            if not _alive(self._ns[0]) or any(_cmdline(pid) != launcher for pid in members):
                return
            time.sleep(0.002)

    def reported(self) -> bool:
        """Whether bwrap reported its sandbox (it did not when it never got that far)."""
        return self._namespace() is not None

    def _namespace(self) -> tuple[int, int] | None:
        self.wait_ready(1.0)
        return self._ns

    def _members(self) -> list[int]:
        namespace = self._namespace()
        if namespace is None:
            return []
        members = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.stat(f"/proc/{entry}/ns/pid").st_ino == namespace[1]:
                        members.append(int(entry))
                except OSError:
                    continue
        return members

    def terminate_all(self) -> None:
        for pid in self._members():
            _signal(pid, signal.SIGTERM)

    def kill_all(self) -> None:
        self._cgroups.kill()
        namespace = self._namespace()
        # SIGKILL of the namespace's pid 1 makes the kernel kill every other member.
        if namespace is not None and namespace[1] == _ns_inode(namespace[0]):
            _signal(namespace[0], signal.SIGKILL)
        if self._outer.poll() is None:
            _signal(self._outer.pid, signal.SIGKILL)


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _ns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _signal(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, number)


def wait_for_sockets(spec: SandboxSpec) -> None:
    """Block until every host socket the spec names exists, or fail naming it."""
    relays = [] if spec.lazy_relays else list(spec.tcp_relays.values())
    sockets = [*relays, *spec.unix_sockets.values()]
    deadline = time.monotonic() + spec.socket_wait_seconds
    for path in sockets:
        while True:
            try:
                if stat.S_ISSOCK(path.stat().st_mode):
                    break
                raise SandboxError(f"{path} is not a unix socket")
            except FileNotFoundError:
                if time.monotonic() >= deadline:
                    raise SandboxError(
                        f"unix socket {path} did not appear within {spec.socket_wait_seconds} s",
                        hint="start the service that serves it before the sandbox",
                    ) from None
                time.sleep(0.02)


def _identity_files(identity: _launch.Identity, hostname: str) -> dict[str, bytes]:
    home = "/tmp"
    return {
        "/etc/passwd": (
            "root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"{identity.name}:x:{identity.uid}:{identity.gid}::{home}:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ).encode(),
        "/etc/group": f"root:x:0:\n{identity.name}:x:{identity.gid}:\nnogroup:x:65534:\n".encode(),
        "/etc/hosts": f"127.0.0.1 localhost {hostname}\n::1 localhost\n".encode(),
        "/etc/hostname": f"{hostname}\n".encode(),
    }


class _Builder:
    """Accumulates bwrap options and the fds they refer to."""

    def __init__(self, identity: _launch.Identity) -> None:
        self.identity = identity
        self.args: list[str] = []
        self.fds: list[int] = []
        self.staged: list[Path] = []

    def bind(self, source: Path, target: Path, kind: str) -> None:
        """kind: --ro-bind, --bind or --dev-bind; stages what the uid cannot reach."""
        if not os.path.lexists(source):
            raise SandboxError(f"mount source {source} does not exist")
        if self.identity.drop and not _launch.reachable_by(source, self.identity):
            self.staged.append(source)
            source = _launch.staged_path(len(self.staged) - 1, source.is_dir())
        self.args += [kind, str(source), str(target)]

    def executable(self, program: str) -> str:
        """``program`` as the sandbox uid can run it: a tools folder it cannot reach (e.g.
        under root-only /root) is staged like a mount source; its ``bin/`` wrapper finds
        ``libexec/`` and ``lib/`` beside itself."""
        path = Path(program)
        if (not self.identity.drop or not _tools.in_tools_dir(program)
                or _launch.reachable_by(path, self.identity)):
            return program
        self.staged.append(path.parent.parent)
        staged = _launch.staged_path(len(self.staged) - 1, directory=True)
        return str(staged / path.parent.name / path.name)

    def data(self, content: bytes, target: str) -> None:
        fd = _launch.memfd(content, "vtbench-sandbox-data")
        self.fds.append(fd)
        self.args += ["--ro-bind-data", str(fd), target]

    def system(self, spec: SandboxSpec) -> None:
        self.args += ["--unshare-all", "--unshare-user", "--disable-userns",
                      "--die-with-parent", "--new-session", "--hostname", spec.hostname]
        self.args += ["--ro-bind", "/usr", "/usr"]
        for top in _TOP:
            host = Path("/") / top
            if host.is_symlink():
                self.args += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                self.args += ["--ro-bind", str(host), str(host)]
        for name in _ETC:
            if os.path.exists(f"/etc/{name}"):
                self.args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        for target, content in _identity_files(self.identity, spec.hostname).items():
            self.data(content, target)
        size = str(spec.limits.tmp_mb * 1024 * 1024)
        self.args += ["--proc", "/proc", "--dev", "/dev",
                      "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
                      "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]

    def user(self, spec: SandboxSpec) -> None:
        for mount in spec.mounts:
            self.bind(mount.source, mount.target, "--bind" if mount.writable else "--ro-bind")
        for inside, host in spec.unix_sockets.items():
            self.bind(host, inside, "--bind")
        for port, host in spec.tcp_relays.items():
            source, target = relay_bind(port, host, spec.lazy_relays)
            self.bind(source, target, "--ro-bind" if spec.lazy_relays else "--bind")
        if spec.gpus:
            for node in sorted(glob.glob("/dev/nvidia*")):
                self.args += ["--dev-bind", node, node]

    def finish(self, spec: SandboxSpec, info_fd: int) -> None:
        self.args += ["--remount-ro", "/", "--chdir", str(spec.cwd), "--clearenv"]
        for name, value in spec.command_env().items():
            self.args += ["--setenv", name, value]
        self.args += ["--info-fd", str(info_fd)]


class BwrapSandbox(RunsToCompletion):
    """Runs commands under bubblewrap (see the module docstring for the policy)."""

    name = "bwrap"

    def start(
        self, argv: list[str], spec: SandboxSpec,
        stdin: Stream = None, stdout: Stream = None, stderr: Stream = None,
    ) -> SandboxProcess:
        if not argv:
            raise SandboxError("no command to run")
        identity = _launch.sandbox_identity()
        bwrap, prlimit = _launch.tool("bwrap"), _launch.tool("prlimit")
        wait_for_sockets(spec)
        builder = _Builder(identity)
        builder.system(spec)
        builder.user(spec)
        bwrap = builder.executable(bwrap)
        info_read, info_write = os.pipe()
        builder.finish(spec, info_write)
        args_fd = _launch.memfd(b"".join(a.encode() + b"\0" for a in builder.args), "bwrap-args")
        cgroups = _limited_cgroups(spec)
        command = relay_argv(spec.tcp_relays, argv, lazy_seconds=relay_wait(spec))
        outer = [
            *_launch.root_prefix(cgroups.procs_files, builder.staged),
            prlimit, *_launch.rlimit_args(spec.limits, nproc="pids" not in cgroups.dirs), "--",
            *_launch.drop_args(identity),
            bwrap, "--args", str(args_fd), "--", *command,
        ]
        fds = [args_fd, info_write, *builder.fds]
        try:
            # Where the cpuset holds the tree, the affinity is only its first moment's.
            with on_cores(spec.limits.cores):
                popen = subprocess.Popen(
                    outer, env=_LAUNCH_ENV, stdin=stdin, stdout=stdout, stderr=stderr,
                    pass_fds=fds, start_new_session=True, cwd="/",
                )
        except BaseException:
            os.close(info_read)
            cgroups.remove()
            raise
        finally:
            for fd in fds:
                os.close(fd)
        killer = _NamespaceKiller(info_read, popen, cgroups)
        killer.wait_command(_READY_SECONDS)
        clock = cgroups.cpu_clock()
        return SandboxProcess(popen, killer, spec.limits, cleanup=_cleanup(cgroups),
                              entered=killer.reported,
                              cpu_clock=clock.seconds if clock is not None else None)


def _limited_cgroups(spec: SandboxSpec) -> _cgroup.CgroupSet:
    """The sandbox's cgroups; refuses when memory, pids, cores or the CPU time would not be
    limited per sandbox and the operator has not allowed weak limits."""
    limits = spec.limits
    cgroups = _cgroup.create(limits.pids, limits.memory_mb, limits.cpus, cores=limits.cores,
                             cpu_time=limits.cpu_seconds is not None)
    unlimited = [name for name, value, controller in (
        ("memory_mb", limits.memory_mb, "memory"), ("pids", limits.pids, "pids"),
        ("cores", limits.cores, "cpuset"), ("cpu_seconds", limits.cpu_seconds, "cpuacct"))
        if value is not None and controller not in cgroups.dirs]
    if unlimited and not _cgroup.weak_limits_allowed():
        cgroups.remove()
        raise SandboxUnavailable(
            f"no per-sandbox cgroup for {' and '.join(unlimited)} on this host "
            f"(limits: {_cgroup.support().describe()})",
            hint="delegate a cgroup v2 subtree with memory, pids and cpuset to the runner "
                 "(README: Sandbox limits), or pass --allow-weak-limits")
    return cgroups


def _cleanup(cgroups: _cgroup.CgroupSet) -> Callable[[], str | None]:
    def cleanup() -> str | None:
        hit = cgroups.limit_hit()
        cgroups.remove()
        return hit

    return cleanup
