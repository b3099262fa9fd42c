"""The workspace's disk limit: a filesystem of its own, ``resources.disk_gb`` in size.

A sparse image file beside the workspace (``workspace.img``), formatted ext4 and
loop-mounted at ``workspace/`` (``nodev``, ``nosuid``) while the episode runs, so that
writes beyond the limit fail with ENOSPC inside the sandbox and never fill the host's
disk. The image costs only what is written. When the episode is finished its contents are
copied out to a plain ``workspace/`` folder and the image is deleted; a runner that stops
early unmounts it, and ``--resume`` mounts it again. Inside the image setuid bits and
device files are inert (``nosuid``, ``nodev``), on the host they would not be: before the
copy, setuid/setgid bits are cleared and every file that is neither a regular file, a
folder nor a symlink (FIFOs, sockets, device files) is removed.

Mounting needs root (the runner is root whenever it drops the sandbox to its own uid);
elsewhere :func:`unavailable` says why and only the per-file size limit holds.
"""

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

from vtbench.errors import VtbenchError

BUSY_WAIT_SECONDS = 30.0
"""How long an unmount waits for the last process to close the workspace's files."""


class DiskError(VtbenchError):
    pass


def unavailable() -> str | None:
    """Why a workspace disk cannot be made here, or None when it can."""
    if os.geteuid() != 0:
        return "mounting a workspace filesystem needs root"
    missing = [tool for tool in ("mkfs.ext4", "mount", "umount", "cp") if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not found (apt-get install e2fsprogs mount coreutils)"
    if not Path("/dev/loop-control").exists():
        return "no loop devices (/dev/loop-control is missing)"
    return None


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DiskError(f"{argv[0]} failed: {(done.stderr or done.stdout).strip()[-300:]}")


class WorkspaceDisk:
    """The size-limited filesystem of one episode's workspace."""

    def __init__(self, workspace: Path, busy_wait_seconds: float = BUSY_WAIT_SECONDS) -> None:
        self.workspace = workspace
        self.busy_wait_seconds = busy_wait_seconds
        self.image = workspace.with_name(workspace.name + ".img")

    @property
    def mounted(self) -> bool:
        return os.path.ismount(self.workspace)

    def create(self, size_gb: float) -> None:
        """Make and mount an empty filesystem of ``size_gb`` at the workspace path."""
        with self.image.open("wb") as image:
            image.truncate(int(size_gb * 1024**3))
        _run("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", str(self.image))
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.attach()
        (self.workspace / "lost+found").rmdir()

    def attach(self) -> None:
        """Mount the image again (after a runner crash), unless it already is."""
        if self.image.exists() and not self.mounted:
            _run("mount", "-o", "loop,nodev,nosuid", str(self.image), str(self.workspace))

    def detach(self) -> None:
        """Unmount, keeping the image (a resumed episode mounts it again).

        A process still holding a file of the workspace (the grader ending a late intake)
        gets ``busy_wait_seconds`` to let go; then the filesystem is unmounted lazily: it
        leaves the path at once and the kernel frees it when the last file closes."""
        deadline = time.monotonic() + self.busy_wait_seconds
        while self.mounted:
            try:
                _run("umount", str(self.workspace))
            except DiskError as err:
                if "busy" not in str(err):
                    raise
                if time.monotonic() >= deadline:
                    _run("umount", "--lazy", str(self.workspace))
                else:
                    time.sleep(0.2)

    def settle(self) -> None:
        """Copy the contents out to a plain folder, unmount, delete the image (a workspace
        without a disk limit is a plain folder already, and is only defused)."""
        if not self.image.exists():
            if self.workspace.is_dir():
                defuse(self.workspace)
            return
        self.attach()
        defuse(self.workspace)
        copy = self.workspace.with_name(self.workspace.name + ".copy")
        shutil.rmtree(copy, ignore_errors=True)
        copy.mkdir()
        _run("cp", "-a", "--", f"{self.workspace}/.", str(copy))
        self.detach()
        self.workspace.rmdir()
        copy.rename(self.workspace)
        self.image.unlink()


def defuse(tree: Path) -> None:
    """Make ``tree`` (the agent is stopped) safe to hold on the host: no setuid or setgid
    bit, no FIFO, socket or device file."""
    for folder, subfolders, files in os.walk(tree):
        for name in [*subfolders, *files]:
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                os.unlink(path)
            elif mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
