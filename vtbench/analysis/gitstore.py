"""Read snapshots out of a workspace's git repository through one ``git cat-file`` process.

For an episode the runner made, the history is the runner's ``snapshots.git`` beside the
workspace, which the sandbox never sees; it is then the only repository read, so a
``.git`` the agent planted inside the workspace is never looked at, not even when
``snapshots.git`` is missing (the history is then refused, naming it). Any other repository
(a workspace that carries its own ``.git``) is trusted no further: the analysis only
reads objects (commits, trees, blobs), refuses a repository that borrows objects from
elsewhere (``objects/info/alternates``), and keeps an object only when its bytes hash to
its name. A loose object is read straight from ``objects/xx/…`` (no symlinks followed,
zlib-inflated); any other (packed) object comes from the plumbing command
``git cat-file --batch``, started on first need, which runs no hooks, no filters, no pager
and touches no work tree, and is hashed here again. Replace refs are ignored and the
repository may be owned by another uid (the sandbox user). Trees are parsed here, so a
report over a thousand small workspaces spawns few processes or none.

Guarantees: :class:`SnapshotStore` returns bytes exactly as committed; an unknown,
malformed or forged object raises :class:`~vtbench.errors.AnalysisError` with the object
named, and so does any tree entry that is not a file, a symlink or a folder (a gitlink,
whose contents live in another repository).
"""

import hashlib
import os
import re
import subprocess
import zlib
from pathlib import Path
from types import TracebackType

from vtbench.errors import AnalysisError
from vtbench.layout import SNAPSHOTS_DIR, EpisodePaths

OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
ALTERNATES = ("objects/info/alternates", "objects/info/http-alternates")
BATCH = 48
"""Most object names sent to git at once: 48 names fit even a one-page pipe buffer, so
git never blocks on its output while we are still writing its input."""
MAX_PARENT_WALK = 10_000
"""Most commits walked back from a snapshot when looking for snapshot 0."""


class SnapshotStore:
    """Commits, trees and blobs of one workspace repository (use as a context manager)."""

    def __init__(self, repo: Path) -> None:
        git_dir = find_git_dir(repo)
        if git_dir is None:
            raise AnalysisError(f"{repo}: not a git repository",
                                hint="point the record's `workspace` at the workspace folder")
        if not _is_git_dir(git_dir):
            raise AnalysisError(f"{git_dir} is missing: the runner made this episode and keeps"
                                " its snapshots there (a .git in the workspace is the agent's)",
                                hint="copy episode folders whole: snapshots.git is the history")
        borrowed = [name for name in ALTERNATES if os.path.lexists(git_dir / name)]
        if borrowed:
            raise AnalysisError(f"{git_dir}: borrows objects from elsewhere ({borrowed[0]})",
                                hint="remove it: a snapshot history holds its own objects")
        self.repo = repo
        self._git_dir = git_dir
        self._objects = str(git_dir / "objects")
        self._proc: subprocess.Popen[bytes] | None = None
        self._trees: dict[str, list[tuple[str, str, str]]] = {}
        self._small: dict[str, tuple[str, bytes]] = {}
        """Commits already read (trees are kept parsed, blobs not at all)."""

    def __enter__(self) -> "SnapshotStore":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=10)

    def read(self, rev: str) -> tuple[str, bytes]:
        """The (type, content) of one object; raises AnalysisError when it is missing."""
        return self.read_many([rev])[rev]

    def read_many(self, revs: list[str]) -> dict[str, tuple[str, bytes]]:
        """Several objects with one round trip to git for those not stored loose."""
        found: dict[str, tuple[str, bytes]] = {}
        missing = []
        for rev in dict.fromkeys(revs):
            if "\n" in rev or " " in rev or not rev:
                raise AnalysisError(f"{self.repo}: bad object name {rev!r}")
            cached = self._small.get(rev)
            loose = cached or (self._read_loose(rev) if OBJECT_ID.fullmatch(rev) else None)
            if loose is None:
                missing.append(rev)
            else:
                found[rev] = loose
        for start in range(0, len(missing), BATCH):
            found |= self._read_git(missing[start:start + BATCH])
        for rev, (kind, body) in found.items():
            if kind == "commit":
                self._small[rev] = (kind, body)
        return found

    def _read_loose(self, oid: str) -> tuple[str, bytes] | None:
        path = os.path.join(self._objects, oid[:2], oid[2:])
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            compressed = handle.read()
        try:
            raw = zlib.decompress(compressed)
        except zlib.error:
            return None
        header, nul, body = raw.partition(b"\0")
        kind, _, size = header.decode(errors="replace").partition(" ")
        if not _hashes_to(oid, kind, body) or not nul or size != str(len(body)):
            return None
        return kind, body

    def _read_git(self, revs: list[str]) -> dict[str, tuple[str, bytes]]:
        """Ask ``git cat-file --batch`` for ``revs`` (at most BATCH names) in one write."""
        if self._proc is None:
            self._proc = _start_cat_file(self._git_dir)
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(b"".join(rev.encode() + b"\n" for rev in revs))
            stdin.flush()
        except BrokenPipeError:
            pass
        found = {}
        for rev in revs:
            header = stdout.readline().decode(errors="replace").split()
            if len(header) != 3:
                self._restart()
                raise AnalysisError(f"{self.repo}: object {rev} is missing",
                                    hint="the workspace history was changed after the episode")
            oid, kind, body = header[0], header[1], stdout.read(int(header[2]))
            stdout.read(1)  # the newline after each object
            if (OBJECT_ID.fullmatch(rev) and oid != rev) or not _hashes_to(oid, kind, body):
                self._restart()
                raise AnalysisError(f"{self.repo}: object {rev} does not match its hash",
                                    hint="the workspace history was forged or corrupted")
            found[rev] = (kind, body)
        return found

    def _restart(self) -> None:
        """Drop the process: the rest of this batch's answers are unread."""
        self.close()
        self._proc = None

    def commit(self, rev: str) -> tuple[str, list[str], str]:
        """(tree id, parent ids, message) of a commit."""
        return _parse_commit(self.repo, rev, *self.read(rev))

    def root(self, rev: str) -> str:
        """The first commit reached from ``rev`` by first parents (snapshot 0)."""
        for _ in range(MAX_PARENT_WALK):
            _, parents, _ = self.commit(rev)
            if not parents:
                return rev
            rev = parents[0]
        raise AnalysisError(f"{self.repo}: more than {MAX_PARENT_WALK} commits before {rev}")

    def files(self, commit: str, folders: tuple[str, ...]) -> dict[str, str]:
        """{path: blob id} of the regular files under ``folders`` at ``commit``."""
        return self.files_many([commit], folders)[commit]

    def files_many(self, commits: list[str],
                   folders: tuple[str, ...]) -> dict[str, dict[str, str]]:
        """:meth:`files` of several commits, reading their trees level by level in batches."""
        objects = self.read_many(commits)
        trees = {c: _parse_commit(self.repo, c, *objects[c])[0] for c in commits}
        self._load_trees(list(trees.values()))
        found: dict[str, dict[str, str]] = {c: {} for c in commits}
        level = []
        for commit, tree in trees.items():
            top = {name: (mode, oid) for mode, name, oid in self._trees[tree]}
            level += [(commit, folder + "/", top[folder][1]) for folder in folders
                      if top.get(folder, ("", ""))[0] == "40000"]
        while level:
            self._load_trees([oid for _, _, oid in level])
            deeper = []
            for commit, prefix, oid in level:
                for mode, name, child in self._trees[oid]:
                    if mode == "40000":
                        deeper.append((commit, prefix + name + "/", child))
                    elif mode in ("100644", "100755", "120000"):
                        found[commit][prefix + name] = child
                    else:
                        raise AnalysisError(f"{self.repo}: {prefix + name} at {commit} is not"
                                            f" a file (mode {mode}): its contents are not in"
                                            " the snapshot")
            level = deeper
        return found

    def _load_trees(self, oids: list[str]) -> None:
        wanted = [oid for oid in dict.fromkeys(oids) if oid not in self._trees]
        for oid, (kind, body) in self.read_many(wanted).items():
            if kind != "tree":
                raise AnalysisError(f"{self.repo}: {oid} is a {kind}, not a tree")
            self._trees[oid] = _parse_tree(body, 20 if len(oid) == 40 else 32)

    def blobs(self, oids: list[str]) -> dict[str, bytes]:
        found = {}
        for oid, (kind, body) in self.read_many(oids).items():
            if kind != "blob":
                raise AnalysisError(f"{self.repo}: {oid} is a {kind}, not a blob")
            found[oid] = body
        return found

    def blob(self, oid: str) -> bytes:
        return self.blobs([oid])[oid]


def _parse_commit(repo: Path, rev: str, kind: str, body: bytes) -> tuple[str, list[str], str]:
    if kind != "commit":
        raise AnalysisError(f"{repo}: {rev} is a {kind}, not a commit")
    head, _, message = body.partition(b"\n\n")
    tree, parents = "", []
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"tree":
            tree = value.decode()
        elif key == b"parent":
            parents.append(value.decode())
    return tree, parents, message.decode(errors="replace").strip()


def find_git_dir(path: Path) -> Path | None:
    """The snapshot repository of a workspace: ``snapshots.git`` beside it (where the runner
    keeps snapshots out of the agent's reach) whenever that exists, else ``<path>`` itself
    when it is a git directory, else ``<path>/.git``. For an episode the runner made (its
    folder holds the runner's state) it is ``snapshots.git`` even when that is missing:
    :class:`SnapshotStore` then refuses it rather than read what the agent left."""
    snapshots = path.parent / SNAPSHOTS_DIR
    if EpisodePaths.of_workspace(path).runner_state.is_file():
        return snapshots
    for candidate in (snapshots, path, path / ".git"):
        if _is_git_dir(candidate):
            return candidate
    return None


def _is_git_dir(path: Path) -> bool:
    return (path / "objects").is_dir() and (path / "HEAD").is_file()


def _start_cat_file(git_dir: Path) -> "subprocess.Popen[bytes]":
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"GIT_DIR": str(git_dir), "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.Popen(
        ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "cat-file", "--batch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)


def _hashes_to(oid: str, kind: str, body: bytes) -> bool:
    """Whether ``kind`` + ``body`` is the object git names ``oid``."""
    digest = hashlib.sha1 if len(oid) == 40 else hashlib.sha256
    return digest(f"{kind} {len(body)}".encode() + b"\0" + body).hexdigest() == oid


def _parse_tree(body: bytes, hash_len: int) -> list[tuple[str, str, str]]:
    entries, pos = [], 0
    while pos < len(body):
        space = body.index(b" ", pos)
        nul = body.index(b"\0", space)
        mode = body[pos:space].decode()
        name = body[space + 1:nul].decode(errors="replace")
        oid = body[nul + 1:nul + 1 + hash_len].hex()
        entries.append((mode, name, oid))
        pos = nul + 1 + hash_len
    return entries
