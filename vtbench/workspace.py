"""The episode workspace: the tree the research agent edits, and its snapshot history.

Layout (DESIGN.md)::

    workspace/TASK.md  data/  trainer/  harness/  models/base/  models/initial/  models/<name>/

Snapshots live in a git directory *beside* the workspace (``snapshots.git``), never inside
it, so nothing the agent does in the sandbox can rewrite its own history. A snapshot
commits the bytes of every file of the workspace outside ``models/``: ``TASK.md``,
``data/``, ``trainer/``, ``harness/`` and whatever else the agent wrote there (an
``alt_trainer/``, an ``alt_data/``), nested ``.git`` folders included, no git attributes
applied (see :class:`TreeWriter`); models are not versioned (candidates are hashed by the
grader's intake instead). Trusted code takes the snapshots (at creation, and when a
validation, the submission or a candidate's lineage needs one).

The history is bounded and kept small: a snapshot may add at most the bytes its caller
allows (the grader passes what is left of the episode's store quota, and each new object
costs at least a disk block, so many tiny files are counted too); a snapshot past it is
refused whole, its new objects removed. Identical files are stored once (objects are
named by their content), and the objects of a snapshot that wrote many are packed into
one pack file (:func:`pack`).
"""

import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from vtbench.errors import SnapshotRefused
from vtbench.spec import Budgets
from vtbench.tasks.materialize import materialize
from vtbench.tasks.registry import Task

log = logging.getLogger("vtbench.workspace")
UNTRACKED = ("models",)
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""Workspace entries a snapshot leaves out: candidates are hashed by the grader's intake."""
BLOCK = 4096
"""What one stored file costs at least on disk (a block, and an inode)."""
PACK_AFTER = 64
"""A snapshot that wrote more new objects than this packs them into one file."""
MAX_PACKS = 32
"""More packs than this are packed again into one."""
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "vtbench", "GIT_AUTHOR_EMAIL": "vtbench@localhost",
                "GIT_COMMITTER_NAME": "vtbench", "GIT_COMMITTER_EMAIL": "vtbench@localhost"}


def git(git_dir: Path, workspace: Path, *args: str) -> str:
    env = {**GIT_IDENTITY, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(git_dir),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(workspace)}
    done = subprocess.run(["git", *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def snapshot(git_dir: Path, workspace: Path, message: str,
             allowance: int | None = None) -> str:
    """Commit the workspace outside ``models/`` (an empty commit if nothing changed);
    returns the commit. ``allowance``: bytes the new objects may take on disk (None: no
    bound); past it the snapshot is refused and leaves nothing behind.

    Moving the branch checks its old value, so of two snapshots racing, one fails rather
    than dropping the other from the history."""
    writer = TreeWriter(git_dir, allowance)
    try:
        tree = writer.root(workspace, leave_out=UNTRACKED)
    except BaseException:
        writer.discard()
        raise
    head = head_commit(git_dir, workspace)
    parents = ["-p", head] if head else []
    commit = git(git_dir, workspace, "commit-tree", tree, *parents, "-m", message)
    git(git_dir, workspace, "update-ref", "HEAD", commit, head)
    if len(writer.written) > PACK_AFTER:
        try:
            pack(git_dir, workspace)
        except subprocess.CalledProcessError as error:  # the snapshot stands, loose
            log.warning("packing %s failed: %s", git_dir, (error.stderr or "").strip()[-300:])
    return commit


def head_commit(git_dir: Path, workspace: Path) -> str:
    """The latest snapshot ("" before the first)."""
    try:
        return git(git_dir, workspace, "rev-parse", "--verify", "--quiet", "HEAD")
    except subprocess.CalledProcessError:
        return ""


def pack(git_dir: Path, workspace: Path) -> None:
    """Move the loose objects the history reaches into a pack (one file, one index), and
    everything into one pack once there are more than :data:`MAX_PACKS`."""
    packs = len(list((git_dir / "objects" / "pack").glob("*.pack")))
    whole = ["-a"] if packs >= MAX_PACKS else []
    git(git_dir, workspace, "-c", "repack.writeBitmaps=false", "-c", "gc.auto=0",
        "repack", "-d", "-q", *whole)


def history_bytes(git_dir: Path) -> int:
    """What the snapshot history takes on disk (every file, by :func:`disk_bytes`)."""
    total = 0
    for folder, _, files in os.walk(git_dir):
        for name in files:
            try:
                total += disk_bytes(os.lstat(os.path.join(folder, name)))
            except FileNotFoundError:
                continue
    return total


def disk_bytes(info: os.stat_result) -> int:
    """A file's cost on disk: its allocated blocks, and at least a block per started
    :data:`BLOCK` of its size."""
    return max(info.st_blocks * 512, -(-info.st_size // BLOCK) * BLOCK)


def packed_objects(git_dir: Path) -> set[str]:
    """Names of the objects in the history's packs (read from their version-2 indexes)."""
    found: set[str] = set()
    for index in (git_dir / "objects" / "pack").glob("*.idx"):
        data = index.read_bytes()
        if data[:8] != b"\377tOc\0\0\0\2":
            continue
        count = int.from_bytes(data[8 + 255 * 4:8 + 256 * 4], "big")
        names = data[8 + 256 * 4:8 + 256 * 4 + 20 * count]
        found.update(names[i:i + 20].hex() for i in range(0, len(names), 20))
    return found


def task_markdown(task: Task, budgets: Budgets) -> str:
    """TASK.md: the task's README and the rules, with the episode's own ``budgets``."""
    harness = ("`harness/` is yours to change; `validate` and `submit` use it unless "
               "`--harness DIR` names another folder." if task.spec.harness_editable else
               "`harness/` is fixed: the grader always runs the task's own harness.")
    return task.readme() + f"""
## Budget and rules
- Wall clock: {budgets.wall_clock_minutes:g} minutes; validations: {budgets.validations}.
  `vtbench status` shows what is left; the agent is stopped at `$VTBENCH_DEADLINE` (unix
  seconds), and without a submission the initial system is the result.
- {harness}
- Candidates are model folders in `models/` holding safetensors weights, `config.json`
  and tokenizer files only (no pickles, no symlinks, no remote code).
- The test split is hidden. You submit exactly once; the submission is scored on test
  after the episode, and you are not told the result.

## Commands
- `vtbench status` shows your remaining budget.
- `vtbench validate --model models/X` scores a candidate (with `harness/`) on the
  validation split and prints the score; `--json` adds every instance's trajectory.
- `vtbench models` lists candidates and their lineage.
- `vtbench merge --method linear|slerp|ties|dare_ties|task_arithmetic --models models/A
  --models models/B --out models/C` merges candidates (`--models` once per candidate).
- `vtbench submit --model models/X` submits your final system (with `harness/`) and ends
  the episode.
- Train with `python trainer/train.py --base models/base --out models/X` (see `trainer/`).
"""


def read_only_copy(source: Path, target: Path) -> None:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)


def create_workspace(task: Task, workspace: Path, git_dir: Path, base_model: Path,
                     initial_model: Path, budgets: Budgets) -> str:
    """Build the workspace from the task's public files, ``TASK.md`` stating the episode's
    ``budgets``; returns snapshot 0."""
    materialize(task, workspace)
    (workspace / "TASK.md").write_text(task_markdown(task, budgets))
    read_only_copy(base_model, workspace / "models" / "base")
    read_only_copy(initial_model, workspace / "models" / "initial")
    git_dir.mkdir(parents=True)
    git(git_dir, workspace, "init", "--quiet", "--initial-branch=main")
    return snapshot(git_dir, workspace, "snapshot 0: initial workspace")


MAX_DEPTH = 128
"""Most folders nested inside one snapshot (each level holds one open descriptor)."""
CHUNK = 1 << 20
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
_OPEN_FOLDER = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY


class TreeWriter:
    """Writes the objects of folders into one git directory's ``objects/``.

    ``git add`` would not record what the agent's files hold: a folder holding ``.git`` is
    stored as a gitlink (a commit id the agent picks, its files left out), and a
    ``.gitattributes`` the agent writes can rewrite bytes on the way in (``text``, ``eol``,
    ``ident``). :class:`TreeWriter` therefore walks the tree itself and writes loose objects
    in git's format (zlib-deflated ``<type> <size>\\0<body>``, named by SHA-1): every regular
    file as a blob of its exact bytes (mode 100755 when its owner may execute it, else
    100644), every symlink as a blob of its target (mode 120000), every non-empty folder as a
    tree, ``.git`` folders included. FIFOs, sockets and device files hold no bytes and are
    left out, as are empty folders (git records none).

    The walk opens every folder and file relative to its parent's descriptor without
    following symlinks, so swapping a folder for a symlink mid-walk cannot pull host files
    into a snapshot. Folders nested deeper than :data:`MAX_DEPTH` are refused with
    :class:`~vtbench.errors.SnapshotRefused`: the one thing a snapshot cannot record.

    An object already in the history (loose or packed) is not written again. New objects
    are counted by :func:`disk_bytes` as they are written; past ``allowance`` the walk
    stops with :class:`~vtbench.errors.SnapshotRefused`, and :meth:`discard` removes what
    it wrote.
    """

    def __init__(self, git_dir: Path, allowance: int | None = None) -> None:
        self.objects = git_dir / "objects"
        self.allowance = allowance
        self.known = packed_objects(git_dir)
        self.added = 0
        """Bytes the new objects take on disk."""
        self.written: list[Path] = []
        """The new objects, in the order they were written."""

    def root(self, folder: Path, leave_out: tuple[str, ...] = ()) -> str:
        """The tree of everything in ``folder`` but the names in ``leave_out``."""
        fd = os.open(folder, _OPEN_FOLDER)
        try:
            names = [n for n in os.listdir(fd) if n not in leave_out]
            return self._tree(fd, names, depth=0) or self._put("tree", b"")
        finally:
            os.close(fd)

    def discard(self) -> None:
        """Remove the objects this writer added (a refused snapshot leaves nothing)."""
        for path in self.written:
            path.unlink(missing_ok=True)
        self.written, self.added = [], 0

    def _tree(self, fd: int, names: list[str], depth: int) -> str | None:
        """The tree of ``names`` in the open folder ``fd``, or None when nothing is in it."""
        entries = []
        for name in names:
            entry = self._entry(fd, name, depth)
            if entry is not None:
                entries.append((name, *entry))
        if not entries:
            return None
        entries.sort(key=lambda e: os.fsencode(e[0]) + (b"/" if e[1] == "40000" else b""))
        return self._put("tree", b"".join(f"{mode} ".encode() + os.fsencode(name) + b"\0"
                                          + bytes.fromhex(oid) for name, mode, oid in entries))

    def _entry(self, fd: int, name: str, depth: int) -> tuple[str, str] | None:
        """(mode, object id) of one entry of folder ``fd``; None for what holds no bytes."""
        try:
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None  # removed since its folder was listed: the snapshot is of what is left
        if stat.S_ISLNK(mode):
            return "120000", self._put("blob", os.fsencode(os.readlink(name, dir_fd=fd)))
        if stat.S_ISDIR(mode):
            if depth >= MAX_DEPTH:
                raise SnapshotRefused(f"{name}: folders nested deeper than {MAX_DEPTH}",
                                      hint="flatten the folders under data/, trainer/, harness/")
            try:
                child = os.open(name, _OPEN_FOLDER, dir_fd=fd)
            except FileNotFoundError:
                return None
            try:
                oid = self._tree(child, os.listdir(child), depth + 1)
            finally:
                os.close(child)
            return ("40000", oid) if oid else None
        if not stat.S_ISREG(mode):
            return None
        try:
            file = os.open(name, _OPEN_FILE, dir_fd=fd)
        except FileNotFoundError:
            return None
        try:
            opened = os.fstat(file)
            if not stat.S_ISREG(opened.st_mode):
                return None
            executable = opened.st_mode & stat.S_IXUSR
            return ("100755" if executable else "100644"), self._put_file(file, opened.st_size)
        finally:
            os.close(file)

    def _put(self, kind: str, body: bytes) -> str:
        raw = f"{kind} {len(body)}".encode() + b"\0" + body
        oid = hashlib.sha1(raw).hexdigest()
        if not self._has(oid):
            self._store(oid, [raw])
        return oid

    def _has(self, oid: str) -> bool:
        return oid in self.known or self._path(oid).exists()

    def _put_file(self, fd: int, size: int) -> str:
        """A blob of the file's first ``size`` bytes, read once to hash and, when the object
        is new, once more to store."""
        header = f"blob {size}".encode() + b"\0"
        digest = hashlib.sha1(header)
        for chunk in _chunks(fd, size):
            digest.update(chunk)
        oid = digest.hexdigest()
        if not self._has(oid):
            os.lseek(fd, 0, os.SEEK_SET)
            self._store(oid, [header, *_chunks(fd, size)])
        return oid

    def _store(self, oid: str, parts: Iterable[bytes]) -> None:
        target = self._path(oid)
        target.parent.mkdir(exist_ok=True)
        squeeze = zlib.compressobj()
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix="tmp_obj_",
                                         delete=False) as out:
            try:
                size = 0
                for chunk in _squeezed(squeeze, parts):
                    out.write(chunk)
                    size += len(chunk)
                    self._charge(size)
            except BaseException:
                os.unlink(out.name)
                raise
        os.chmod(out.name, 0o444)
        os.replace(out.name, target)
        self.written.append(target)
        self.added += disk_bytes(os.stat(target))

    def _charge(self, writing: int) -> None:
        """Refuse once the new objects with the one being written (``writing`` bytes so
        far) would take more than the allowance."""
        if self.allowance is not None and self.added + max(writing, BLOCK) > self.allowance:
            raise SnapshotRefused(
                f"the snapshot needs more than the {self.allowance} bytes left of the "
                "episode's store quota", hint="delete files outside models/ that you no longer "
                "need (every file there is snapshotted), or submit")

    def _path(self, oid: str) -> Path:
        return self.objects / oid[:2] / oid[2:]


class TreeHasher(TreeWriter):
    """The tree hash :class:`TreeWriter` would write for a folder, with nothing written:
    what the runner notes of ``data/`` and ``trainer/`` when a training starts, to compare
    with the snapshot that later names the trained folder."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent"))

    def _has(self, oid: str) -> bool:
        return True


def tree_hash(folder: Path) -> str | None:
    """The git tree hash of everything in ``folder`` as a snapshot records it; None where
    it cannot be read (missing, or nested past :data:`MAX_DEPTH`)."""
    try:
        found = TreeHasher().root(folder)
    except (OSError, SnapshotRefused):
        return None
    return None if found == EMPTY_TREE else found  # a snapshot records no empty folder


def exists_at(dir_fd: int, name: str) -> bool:
    """Whether ``name`` is an entry of the open folder ``dir_fd`` (links not followed)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _squeezed(squeeze: "zlib._Compress", parts: Iterable[bytes]) -> Iterator[bytes]:
    for part in parts:
        yield squeeze.compress(part)
    yield squeeze.flush()


def _chunks(fd: int, size: int) -> Iterator[bytes]:
    left = size
    while left:
        chunk = os.read(fd, min(CHUNK, left))
        if not chunk:
            raise SnapshotRefused("a file shrank while its snapshot was taken",
                                  hint="validate again once the files are written")
        left -= len(chunk)
        yield chunk
