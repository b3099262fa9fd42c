"""Make a tree the research agent wrote inert before it lies on the host as plain files.

Inside the sandbox the workspace is mounted ``nosuid`` and ``nodev``, so a setuid shell or
a device node the agent makes there does nothing. The host's copy of the workspace carries
no such mount options: a file with mode 06755 owned by the sandbox user would be a setuid
program on the host. Before an episode's workspace is left on the host, setuid and setgid
bits are cleared, file capabilities are dropped, and anything that is not a regular file,
a folder or a symbolic link (FIFOs, sockets, device nodes) is removed.
"""

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID
CAPABILITY_XATTR = "security.capability"


@dataclass
class Defused:
    """What :func:`make_inert` changed, for the episode's log."""

    bits_cleared: int = 0
    special_removed: int = 0
    capabilities_dropped: int = 0

    def summary(self) -> str | None:
        if not (self.bits_cleared or self.special_removed or self.capabilities_dropped):
            return None
        return (f"cleared setuid/setgid on {self.bits_cleared} file(s), removed "
                f"{self.special_removed} special file(s), dropped file capabilities of "
                f"{self.capabilities_dropped}")


def make_inert(root: Path) -> Defused:
    """Walk ``root`` without following links and defuse what the agent left there."""
    defused = Defused()
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            defuse(Path(folder) / name, defused)
    defuse(root, defused)
    return defused


def defuse(path: Path, defused: Defused) -> None:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        path.unlink()
        defused.special_removed += 1
        return
    if info.st_mode & PRIVILEGE_BITS:
        path.chmod(stat.S_IMODE(info.st_mode) & ~PRIVILEGE_BITS)
        defused.bits_cleared += 1
    if drop_capabilities(path):
        defused.capabilities_dropped += 1


def drop_capabilities(path: Path) -> bool:
    try:
        os.removexattr(path, CAPABILITY_XATTR, follow_symlinks=False)
    except OSError as error:
        if error.errno in (errno.ENODATA, errno.ENOTSUP):
            return False
        raise
    return True
