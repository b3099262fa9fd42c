"""Run untrusted commands (research agents, harnesses) with only what a spec grants.

Usage::

    from vtbench.sandbox import Limits, Mount, SandboxSpec, get_sandbox, python_runtime_mounts

    spec = SandboxSpec(
        mounts=[*python_runtime_mounts(),
                Mount(source=workspace, target=Path("/workspace"), writable=True)],
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        cwd=Path("/workspace"),
        limits=Limits(wall_seconds=600, memory_mb=4096, pids=256, file_size_mb=1024),
        tcp_relays={8080: grader_socket},        # inside: 127.0.0.1:8080 -> host socket
    )
    result = get_sandbox("bwrap").run([sys.executable, "harness.py"], spec)
    result.returncode, result.stdout, result.timed_out, result.killed_by_limit

``Sandbox.start`` returns a :class:`SandboxProcess` (pid, ``poll``, ``wait(timeout)``,
``kill_tree()`` -> "exited" | "terminated" | "killed") for long-running commands;
its ``never_entered`` says (bwrap only) that the command ended without the sandbox ever
being set up, a failure of the host rather than of the command.

Backends (``get_sandbox(name)``; an unknown name lists the valid ones):

- ``bwrap`` (default): bubblewrap with every namespace unshared. The only network
  interface is a fresh loopback, so nothing outside is reachable except through
  ``tcp_relays`` / ``unix_sockets``. A root caller's sandbox runs as the unprivileged
  user ``vtbench-sbx``, dropped with setpriv *before* bwrap (so the sandbox uid is
  vtbench-sbx on the host too, never a mapped root); a non-root caller's runs as itself.
  A fresh /proc of its own pid namespace, a minimal /dev, tmpfs /tmp and /dev/shm,
  read-only /usr and a small /etc subset (generated passwd/group/hosts; no shadow),
  a read-only root, and the spec's mounts: nothing else of the host is visible.
- ``docker`` (optional, where a Docker daemon runs on this host): the same policy as
  ``docker run`` flags on an empty base image that vtbench builds offline on first use
  (``vtbench-sandbox-base``, ``docker import`` of an in-memory tarball; host /usr bound
  read-only); the same limits, tree kill and relays; a few hundred ms per start.
  Constructing it without a reachable daemon raises one line naming the fix. Details
  and the differences from bwrap: ``vtbench.sandbox._docker``.
- ``none`` (development only): no isolation, a loud warning on stderr at every start.

Host programs (bwrap, socat, setpriv, prlimit) come from the tools folder of an offline
install where there is one (``$VTBENCH_TOOLS_DIR``, else ``<sys.prefix>/vtbench-tools``),
else from the system folders; :func:`sandbox_tools` says which bwrap and socat are in use.
:func:`tools_dir` names that folder (None without one): it also carries programs a bare host
lacks that task commands call (cal, cpio, tree for the shell task), which a caller puts on a
sandbox's PATH after the system folders.

Limits: ``memory_mb`` (address space), ``file_size_mb``, ``open_files`` are per-process
rlimits set with ``prlimit``. ``cpu_seconds`` is a CPU budget for the whole tree: the CPU
time of every process the sandbox ever ran, summed by its cgroup (v1 ``cpuacct.usage``, v2
``cpu.stat``) and checked by a watchdog thread of the parent, which kills the tree once it
is used up (``killed_by_limit == "cpu_seconds"``), so N forked workers share one budget;
each process is also held to it alone by RLIMIT_CPU. ``pids``, ``cpus``, ``cores`` (a
cpuset) and the tree's memory use the same cgroups, one per sandbox, never per uid: cgroup
v2 (a group under the caller's own delegated group; ``cgroup.kill`` ends the tree) where it
delegates memory and pids, else cgroup v1 groups where those controllers are writable
(detected once: ``_cgroup.support()``). Where neither limits memory and pids per sandbox,
no cpuset controller holds ``cores`` or no cgroup counts the CPU time for ``cpu_seconds``,
bwrap refuses to start a spec that asks for them (one line naming the fix) unless the
operator allowed weak limits (``--allow-weak-limits``, environment
``VTBENCH_ALLOW_WEAK_LIMITS=1``); then ``pids`` falls back to RLIMIT_NPROC, which counts
all processes of the sandbox uid, so concurrent sandboxes share it, ``cores`` to the
launcher's affinity (:func:`on_cores`, which also pins trusted work of the caller's
thread), and ``cpu_seconds`` to RLIMIT_CPU alone, per process (the limits' description,
recorded in each episode, says "CPU time per process only"). ``wall_seconds`` is enforced
by the same watchdog; the tree kill ends the whole pid namespace, so children that ignore
SIGTERM, double-fork or call setsid die too, and so does every process left behind when
the command exits. ``SandboxProcess.limit_cpu`` lowers the tree's budget of a running
sandbox (a standby harness gets its budget when its harness starts).

:func:`limit_groups` makes the same per-process-tree groups for a process the caller starts
itself (the model server: trusted code, untrusted weights): the process joins them through
their ``procs_files``; after its end ``limit_hit()`` says whether a limit killed it, and
``remove()`` deletes them.

What the caller must prepare:

- mount sources and sockets exist (``start`` waits up to ``socket_wait_seconds`` for
  sockets; with ``lazy_relays`` it does not wait for relay sockets: their folders are
  bound and each connection retries until the socket accepts). Sources the sandbox uid
  cannot reach (e.g. under root-only /root) are staged by the launcher as root in a
  private mount namespace; no host change needed.
- writable mounts are writable by the sandbox uid: call :func:`prepare_writable` (chown
  to vtbench-sbx when root) on the directory; sockets the sandbox connects to must be
  connectable by it: :func:`grant_socket` (or mode 0666).
- a unix socket is bound by inode: a server that recreates its socket needs new
  sandboxes to see the new one.
- bwrap's ``--die-with-parent`` follows the *thread* that called ``start``: start
  sandboxes from a thread that lives as long as they should.

Not provided: seccomp filtering; output size limits other than ``run``'s
``max_output_bytes``; disk quotas for writable mounts (``file_size_mb`` caps one file);
GPU isolation is cooperative (selected GPUs via CUDA_VISIBLE_DEVICES, all NVIDIA device
nodes of the host bound so that indexes keep their host meaning; with ``gpus=[]`` no
device node is bound and CUDA sees no GPU).
"""

from vtbench.sandbox._affinity import on_cores
from vtbench.sandbox._cgroup import ALLOW_WEAK_ENV as ALLOW_WEAK_LIMITS_ENV
from vtbench.sandbox._cgroup import CgroupSet as LimitGroups
from vtbench.sandbox._cgroup import Support as CgroupLimits
from vtbench.sandbox._cgroup import core_list, parse_core_list, weak_limits_allowed
from vtbench.sandbox._cgroup import create as limit_groups
from vtbench.sandbox._cgroup import support as cgroup_limits
from vtbench.sandbox._process import SandboxProcess
from vtbench.sandbox._protocol import Sandbox
from vtbench.sandbox._resolve import BACKENDS, get_sandbox
from vtbench.sandbox._runtime import grant_socket, prepare_writable, python_runtime_mounts
from vtbench.sandbox._spec import CompletedRun, Ending, Limits, Mount, SandboxSpec
from vtbench.sandbox._tools import TOOLS_ENV, sandbox_tools, tools_dir

__all__ = [
    "ALLOW_WEAK_LIMITS_ENV",
    "BACKENDS",
    "TOOLS_ENV",
    "CgroupLimits",
    "CompletedRun",
    "Ending",
    "LimitGroups",
    "Limits",
    "Mount",
    "Sandbox",
    "SandboxProcess",
    "SandboxSpec",
    "cgroup_limits",
    "core_list",
    "get_sandbox",
    "grant_socket",
    "limit_groups",
    "on_cores",
    "parse_core_list",
    "prepare_writable",
    "python_runtime_mounts",
    "sandbox_tools",
    "tools_dir",
    "weak_limits_allowed",
]
