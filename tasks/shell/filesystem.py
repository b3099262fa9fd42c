"""File-system images and what a command does to one (trusted task code).

An *image* is a gzipped tar of a small file tree whose top-level folders become folders of
the sandbox's root (``/testbed``, ``/system``, ``/data``): deterministic bytes (sorted
entries, owner 0, fixed modification times, gzip header time 0), so the same tree always
gives the same image. :func:`freeze` runs a setup script once in a sandbox and packs what
it wrote; :func:`run` unpacks an image into a fresh scratch folder, runs one command over
it in a fresh bubblewrap sandbox and returns its :class:`Outcome`.

The sandbox (``vtbench.sandbox``, bwrap): no network (a fresh loopback only), the
unprivileged sandbox uid, a read-only root with the host's /usr, the image's folders
writable at their places and nothing else of the host writable; where an offline install
left a tools folder (``vtbench.sandbox.tools_dir``: on a bare GPU host, cal, cpio and tree
come from there), it is mounted read-only at :data:`INSIDE_TOOLS` and its ``bin/`` is last
on the PATH, so a program the host has is the host's (:func:`command_path`); at most
:data:`WALL_SECONDS` of wall clock and of CPU per process, :data:`PIDS` processes,
:data:`MEMORY_MB` of memory, files of at most :data:`FILE_MB`, :data:`OUTPUT_BYTES` of
output kept. The scratch folder lies on the host's disk, so what a command may write there
is bounded by the file-size limit, the time and the process count together; after the run
:func:`state` reads at most :data:`MAX_ENTRIES` entries and :data:`MAX_BYTES` bytes of it,
and a larger tree is the outcome ``overflow`` (which agrees with nothing).

The outcome rule (:func:`agrees`), lenient because two correct commands rarely print the
same bytes: where the gold command changes the file system, a candidate agrees when it
leaves the same file system (names, kinds, permission bits and contents; not times); else
when it leaves the file system unchanged and prints the same lines, in any order.
"""

import base64
import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vtbench.sandbox import Limits, Mount, SandboxSpec, get_sandbox, prepare_writable, tools_dir

WALL_SECONDS = 5.0
PIDS = 256
"""Per sandbox through a cgroup; where only weak limits are allowed it becomes one
RLIMIT_NPROC for every process of the sandbox uid, harnesses evaluated at the same time
included, so it is not tight (a fork bomb is still ended by it or the wall clock)."""
MEMORY_MB = 1024
FILE_MB = 4
OUTPUT_BYTES = 1 << 16
MAX_ENTRIES = 5000
MAX_BYTES = 32 << 20
FIXED_MTIME = 1704067200
"""2024-01-01 00:00 UTC: the modification time of every file a setup wrote without one."""
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
       "SHELL": "/bin/bash", "USER": "user", "TZ": "UTC"}
"""The command's environment; its PATH gains the tools folder's bin/ where there is one."""
INSIDE_TOOLS = Path("/opt/vtbench-tools")
"""Where the tools folder is mounted: outside every image's top-level folders (``testbed``,
``data``, ...), wherever the host keeps it."""


def command_path(inside: bool = True) -> str:
    """The command's PATH: :data:`ENV`'s system folders, then the tools folder's ``bin/``
    where there is one, as the sandbox sees it (``inside``) or as the host does (to ask
    which programs a command would find)."""
    tools = tools_dir()
    if tools is None:
        return ENV["PATH"]
    return f"{ENV['PATH']}:{(INSIDE_TOOLS if inside else tools) / 'bin'}"


@dataclass(frozen=True)
class Outcome:
    """What one command did: its output, the file system it left, how it ended."""

    stdout: str
    state: str
    """Digest of the tree it left (:func:`state`), or ``overflow``."""
    returncode: int
    contained: bool
    """It ended by itself within every limit (no timeout, no limit kill, output kept whole)."""

    def lines(self) -> list[str]:
        return sorted(line.rstrip() for line in self.stdout.splitlines() if line.strip())


def agrees(gold: Outcome, candidate: Outcome, initial_state: str) -> bool:
    """The outcome rule of the module docstring."""
    if not candidate.contained or candidate.state == "overflow":
        return False
    if gold.state != initial_state:
        return candidate.state == gold.state
    return candidate.state == initial_state and candidate.lines() == gold.lines()


# ------------------------------------------------------------------ images

def pack(root: Path) -> bytes:
    """The deterministic image of the folders under ``root``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).parts):
            info = archive.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = int(info.mtime)
            info.pax_headers = {}
            if info.isfile():
                with path.open("rb") as handle:
                    archive.addfile(info, handle)
            else:
                archive.addfile(info)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as compressed:
        compressed.write(buffer.getvalue())
    return out.getvalue()


def encode(image: bytes) -> str:
    return base64.b64encode(image).decode()


def decode(text: str) -> bytes:
    return base64.b64decode(text.encode())


def unpack(image: bytes, root: Path) -> None:
    """The image's tree under ``root`` (no entry may leave it)."""
    with tarfile.open(fileobj=io.BytesIO(image), mode="r:gz") as archive:
        archive.extractall(root, filter="tar")


def top_folders(image: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(image), mode="r:gz") as archive:
        return sorted({name.split("/", 1)[0] for name in archive.getnames()})


def freeze(script: str, folders: list[str]) -> bytes:
    """Run a setup ``script`` once in a sandbox whose ``folders`` (top-level, e.g.
    ``testbed``) are writable, and pack what it left, with fixed modification times (a
    time the script set, before it ran, is kept) and gzip headers whose time is 0."""
    with tempfile.TemporaryDirectory(prefix="vtbench-shell-freeze-") as scratch:
        root = Path(scratch) / "root"
        for folder in folders:
            (root / folder).mkdir(parents=True)
        prepare_writable(root)
        started = time.time() - 5
        _sandboxed(root, ["/bin/bash", "-c", script], wall=60.0)
        for path in [root, *root.rglob("*")]:
            if path.is_file() and not path.is_symlink():
                _zero_gzip_time(path)
            if path.lstat().st_mtime >= started and not path.is_symlink():
                os.utime(path, (FIXED_MTIME, FIXED_MTIME))
        return pack(root)


def _zero_gzip_time(path: Path) -> None:
    with path.open("r+b") as handle:
        if handle.read(4)[:2] == b"\x1f\x8b":
            handle.seek(4)
            handle.write(b"\0\0\0\0")


# ------------------------------------------------------------------ running a command

def run(image: bytes, command: str, wall: float = WALL_SECONDS) -> Outcome:
    """Run ``command`` with bash in a fresh sandbox over a fresh copy of ``image``."""
    with tempfile.TemporaryDirectory(prefix="vtbench-shell-") as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        unpack(image, root)
        prepare_writable(root)
        result = _sandboxed(root, ["/bin/bash", "-c", command], wall=wall)
        tree = state(root)
        _make_removable(root)
    contained = not result.timed_out and result.killed_by_limit is None \
        and not result.output_truncated
    return Outcome(stdout=result.stdout.decode("utf-8", "replace"), state=tree,
                   returncode=result.returncode, contained=contained)


def initial_state(image: bytes) -> str:
    """The digest of the image's own tree."""
    with tempfile.TemporaryDirectory(prefix="vtbench-shell-") as scratch:
        root = Path(scratch)
        unpack(image, root)
        return state(root)


def _sandboxed(root: Path, argv: list[str], wall: float):
    mounts = [Mount(source=root / name, target=Path("/") / name, writable=True)
              for name in sorted(os.listdir(root))]
    tools = tools_dir()
    if tools is not None:
        mounts.append(Mount(source=tools, target=INSIDE_TOOLS))
    spec = SandboxSpec(
        mounts=mounts, env={**ENV, "PATH": command_path()}, cwd=Path("/"),
        limits=Limits(wall_seconds=wall, cpu_seconds=max(1, int(wall)), memory_mb=MEMORY_MB,
                      pids=PIDS, file_size_mb=FILE_MB, tmp_mb=16, open_files=128))
    return get_sandbox("bwrap").run(argv, spec, max_output_bytes=OUTPUT_BYTES)


def state(root: Path) -> str:
    """Digest of every entry under ``root``: path, kind, permission bits and content (a
    link's target); ``overflow`` past :data:`MAX_ENTRIES` entries or :data:`MAX_BYTES`."""
    digest = hashlib.sha256()
    entries, read = 0, 0
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(folder) / name
            entries += 1
            if entries > MAX_ENTRIES:
                return "overflow"
            info = path.lstat()
            relative = path.relative_to(root).as_posix()
            line = f"{relative}\0{stat.S_IFMT(info.st_mode)}\0{stat.S_IMODE(info.st_mode):o}\0"
            if stat.S_ISLNK(info.st_mode):
                line += os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                read += info.st_size
                if read > MAX_BYTES:
                    return "overflow"
                line += _file_digest(path)
            digest.update(line.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return "unreadable"


def _make_removable(root: Path) -> None:
    """Give the owner back the right to enter and empty every folder a command locked."""
    for folder, dirs, _ in os.walk(root):
        for name in dirs:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(0o700)
    shutil.rmtree(root, ignore_errors=True)
