"""The host side of a sandbox start: who the sandbox runs as, rlimits, privilege drop.

When the caller is root, the sandbox runs as the unprivileged user ``vtbench-sbx``. The
drop happens *before* bubblewrap (``setpriv --reuid --regid --clear-groups``, all
capabilities and the bounding set cleared, no_new_privs set): bwrap then builds an
unprivileged user namespace whose uid maps to vtbench-sbx on the host, so even a
sandbox escape is an unprivileged user. (Dropping inside bwrap instead would map the
sandbox uid to host root.)

Mount sources the sandbox uid cannot reach (the Python interpreter under the root-only
``/root/.pyenv``, a socket in the private store) are *staged*: a tiny root shell in a
private mount namespace bind-mounts each of them onto an empty placeholder under
:data:`STAGE_DIR` before dropping privileges; the binds are invisible on the host.
The same shell moves itself into the sandbox's cgroups, so every process is counted.
"""

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from vtbench.errors import SandboxUnavailable
from vtbench.sandbox._spec import Limits
from vtbench.sandbox._tools import tool

SANDBOX_USER = "vtbench-sbx"
STAGE_DIR = Path("/run/vtbench-sandbox-stage")

# $1.. = n cgroup files, the files, m, mount program, (source placeholder)*m, "--", argv
_ROOT_SCRIPT = r"""
set -e
n=$1; shift
while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n-1)); done
m=$1; mount=$2; shift 2
while [ "$m" -gt 0 ]; do "$mount" --bind "$1" "$2"; shift 2; m=$((m-1)); done
shift
exec "$@"
"""


@dataclass(frozen=True)
class Identity:
    """The host uid/gid the sandboxed processes run as."""

    uid: int
    gid: int
    name: str
    drop: bool
    """True when the caller is root and must drop to this identity before bwrap."""


def sandbox_identity() -> Identity:
    """vtbench-sbx when the caller is root, the caller itself otherwise."""
    if os.geteuid() != 0:
        uid = os.getuid()
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = f"uid{uid}"
        return Identity(uid, os.getgid(), name, drop=False)
    try:
        entry = pwd.getpwnam(SANDBOX_USER)
    except KeyError:
        raise SandboxUnavailable(
            f"the unprivileged sandbox user {SANDBOX_USER} does not exist",
            hint=f"create it: useradd --system --no-create-home {SANDBOX_USER}",
        ) from None
    return Identity(entry.pw_uid, entry.pw_gid, SANDBOX_USER, drop=True)


def reachable_by(path: Path, identity: Identity) -> bool:
    """Whether ``identity`` may traverse every directory above ``path`` (ACLs ignored,
    so the answer errs towards staging, which always works)."""
    for parent in path.parents:
        try:
            info = parent.stat()
        except OSError:
            return False
        if info.st_uid == identity.uid:
            bit = stat.S_IXUSR
        elif info.st_gid == identity.gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return False
    return True


def rlimit_args(limits: Limits, nproc: bool) -> list[str]:
    """``prlimit`` options for the limits that are per process (core dumps always off)."""
    args = ["--core=0"]
    if limits.cpu_seconds is not None:
        args.append(f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}")
    if limits.memory_mb is not None:
        args.append(f"--as={limits.memory_mb * 1024 * 1024}")
    if limits.file_size_mb is not None:
        args.append(f"--fsize={limits.file_size_mb * 1024 * 1024}")
    if limits.open_files is not None:
        args.append(f"--nofile={limits.open_files}")
    if nproc and limits.pids is not None:
        args.append(f"--nproc={limits.pids}")
    return args


def drop_args(identity: Identity) -> list[str]:
    if not identity.drop:
        return []
    return [
        tool("setpriv"), f"--reuid={identity.uid}", f"--regid={identity.gid}",
        "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
    ]


def root_prefix(procs_files: list[Path], staged: list[Path]) -> list[str]:
    """The root shell (in a private mount namespace when staging) that joins the cgroups
    and bind-mounts each staged source onto its placeholder under :data:`STAGE_DIR`;
    empty when there is nothing to do."""
    if not procs_files and not staged:
        return []
    args = ["/bin/sh", "-c", _ROOT_SCRIPT, "vtbench-launch", str(len(procs_files))]
    args += [str(path) for path in procs_files]
    args += [str(len(staged)), tool("mount") if staged else "mount"]
    for index, source in enumerate(staged):
        args += [str(source), str(staged_path(index, source.is_dir()))]
    args.append("--")
    if staged:
        return [tool("unshare"), "--mount", "--propagation", "private", "--", *args]
    return args


def staged_path(index: int, directory: bool) -> Path:
    """The placeholder a staged source is bound onto, created on first use (an empty
    directory or file, root-owned, world-readable; it never holds data on the host)."""
    path = STAGE_DIR / f"{'d' if directory else 'f'}{index}"
    if not path.exists():
        STAGE_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(STAGE_DIR, 0o755)
        if directory:
            path.mkdir(mode=0o755, exist_ok=True)
        else:
            path.touch(mode=0o644, exist_ok=True)
    return path


def memfd(data: bytes, name: str) -> int:
    """An anonymous in-memory file holding ``data``, positioned at its start; the fd is
    inheritable only through ``pass_fds``."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
