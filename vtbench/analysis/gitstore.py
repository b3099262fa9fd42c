"""Read snapshots out of a workspace's git repository through one ``git cat-file`` process.

The workspace repository was written by the research agent's sandbox, so nothing in it is
trusted: the analysis only reads objects (commits, trees, blobs). A loose object is read
straight from ``objects/xx/…`` (no symlinks followed, zlib-inflated, and kept only when
its hash matches its name, so a planted file cannot pose as an object); any other object
(packed, or behind an alternate) comes from the plumbing command
``git cat-file --batch``, started on first need, which runs no hooks, no filters, no pager
and touches no work tree. Replace refs are ignored and the repository may be owned by
another uid (the sandbox user). Trees are parsed here, so a report over a thousand small
workspaces spawns few processes or none.

Guarantees: :class:`SnapshotStore` returns bytes exactly as committed; an unknown or
malformed object raises :class:`~vtbench.errors.AnalysisError` with the object named.
"""

import hashlib
import os
import re
import subprocess
import zlib
from pathlib import Path
from types import TracebackType

from vtbench.errors import AnalysisError

OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
SNAPSHOTS_DIR = "snapshots.git"
MAX_PARENT_WALK = 10_000
"""Most commits walked back from a snapshot when looking for snapshot 0."""


class SnapshotStore:
    """Commits, trees and blobs of one workspace repository (use as a context manager)."""

    def __init__(self, repo: Path) -> None:
        git_dir = find_git_dir(repo)
        if git_dir is None:
            raise AnalysisError(f"{repo}: not a git repository",
                                hint="point the record's `workspace` at the workspace folder")
        self.repo = repo
        self._git_dir = git_dir
        self._objects = str(git_dir / "objects")
        self._proc: subprocess.Popen[bytes] | None = None
        self._trees: dict[str, list[tuple[str, str, str]]] = {}

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
        if "\n" in rev or not rev:
            raise AnalysisError(f"{self.repo}: bad object name {rev!r}")
        loose = self._read_loose(rev) if OBJECT_ID.fullmatch(rev) else None
        return loose if loose is not None else self._read_git(rev)

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
        digest = (hashlib.sha1 if len(oid) == 40 else hashlib.sha256)(raw).hexdigest()
        header, nul, body = raw.partition(b"\0")
        kind, _, size = header.decode(errors="replace").partition(" ")
        if digest != oid or not nul or not size.isdigit() or int(size) != len(body):
            return None
        return kind, body

    def _read_git(self, rev: str) -> tuple[str, bytes]:
        if self._proc is None:
            self._proc = _start_cat_file(self._git_dir)
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(rev.encode() + b"\n")
            stdin.flush()
            header = stdout.readline().decode(errors="replace").split()
        except BrokenPipeError:
            header = []
        if len(header) != 3:
            raise AnalysisError(f"{self.repo}: object {rev} is missing",
                                hint="the workspace history was changed after the episode")
        content = stdout.read(int(header[2]))
        stdout.read(1)  # the newline after each object
        return header[1], content

    def commit(self, rev: str) -> tuple[str, list[str], str]:
        """(tree id, parent ids, message) of a commit."""
        kind, body = self.read(rev)
        if kind != "commit":
            raise AnalysisError(f"{self.repo}: {rev} is a {kind}, not a commit")
        head, _, message = body.partition(b"\n\n")
        tree, parents = "", []
        for line in head.split(b"\n"):
            key, _, value = line.partition(b" ")
            if key == b"tree":
                tree = value.decode()
            elif key == b"parent":
                parents.append(value.decode())
        return tree, parents, message.decode(errors="replace").strip()

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
        tree, _, _ = self.commit(commit)
        top = {name: (mode, oid) for mode, name, oid in self._tree(tree)}
        found: dict[str, str] = {}
        for folder in folders:
            mode, oid = top.get(folder, ("", ""))
            if mode == "40000":
                self._walk(oid, folder + "/", found)
        return found

    def _walk(self, tree: str, prefix: str, found: dict[str, str]) -> None:
        for mode, name, oid in self._tree(tree):
            if mode == "40000":
                self._walk(oid, prefix + name + "/", found)
            elif mode in ("100644", "100755"):
                found[prefix + name] = oid

    def _tree(self, oid: str) -> list[tuple[str, str, str]]:
        if oid not in self._trees:
            kind, body = self.read(oid)
            if kind != "tree":
                raise AnalysisError(f"{self.repo}: {oid} is a {kind}, not a tree")
            self._trees[oid] = _parse_tree(body, 20 if len(oid) == 40 else 32)
        return self._trees[oid]

    def blob(self, oid: str) -> bytes:
        kind, body = self.read(oid)
        if kind != "blob":
            raise AnalysisError(f"{self.repo}: {oid} is a {kind}, not a blob")
        return body


def find_git_dir(path: Path) -> Path | None:
    """The snapshot repository of a workspace: ``<path>/.git``, ``<path>`` itself when it
    is a git directory, or ``snapshots.git`` beside the workspace (where the runner keeps
    snapshots out of the agent's reach)."""
    for candidate in (path / ".git", path, path.parent / SNAPSHOTS_DIR):
        if (candidate / "objects").is_dir() and (candidate / "HEAD").is_file():
            return candidate
    return None


def _start_cat_file(git_dir: Path) -> "subprocess.Popen[bytes]":
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"GIT_DIR": str(git_dir), "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.Popen(
        ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "cat-file", "--batch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)


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
