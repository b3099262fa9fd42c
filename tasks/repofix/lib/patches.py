"""Reading and applying a harness's unified diff (trusted task code; the diff is not).

The applier is our own and strict about what it touches: a diff may change only existing
Python files of the library's package (never a test, a ``conftest.py``, a new or a deleted
file), so a diff that edits or deletes tests gains nothing. Hunks are matched by their
context and removed lines, searched from the line the header names outward (model-written
headers often count wrong); trailing whitespace is forgiven, nothing else.
"""

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")
MAX_FILES = 20


class PatchError(ValueError):
    """The diff cannot be applied (the instance scores 0)."""


@dataclass
class Hunk:
    start: int
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)


@dataclass
class FilePatch:
    path: str
    hunks: list[Hunk] = field(default_factory=list)


def clean_path(raw: str) -> str:
    name = raw.split("\t", 1)[0].strip()
    if name == "/dev/null":
        raise PatchError("a diff may not create or delete files")
    if name.startswith(("a/", "b/")):
        name = name[2:]
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise PatchError(f"path outside the tree: {name[:100]!r}")
    return path.as_posix()


def parse(diff: str) -> list[FilePatch]:
    files: list[FilePatch] = []
    lines = diff.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith(
                "+++ "):
            old, new = clean_path(line[4:]), clean_path(lines[index + 1][4:])
            if old != new:
                raise PatchError("a diff may not rename files")
            files.append(FilePatch(new))
            index += 2
            continue
        match = HUNK.match(line)
        if match:
            if not files:
                raise PatchError("a hunk before any file header")
            hunk = Hunk(int(match.group(1)))
            files[-1].hunks.append(hunk)
            index = read_hunk(lines, index + 1, hunk)
            continue
        index += 1
    if len(files) > MAX_FILES:
        raise PatchError(f"a diff of more than {MAX_FILES} files")
    return files


def read_hunk(lines: list[str], index: int, hunk: Hunk) -> int:
    while index < len(lines):
        line = lines[index]
        if line.startswith(("@@", "--- ", "diff ")):
            break
        if line.startswith("\\"):
            index += 1
            continue
        tag, text = (line[:1], line[1:]) if line else (" ", "")
        if tag not in " +-":
            break
        if tag in " -":
            hunk.old.append(text)
        if tag in " +":
            hunk.new.append(text)
        index += 1
    return index


def locate(lines: list[str], hunk: Hunk, strict: bool) -> int | None:
    def same(a: str, b: str) -> bool:
        return a == b if strict else a.rstrip() == b.rstrip()

    size = len(hunk.old)
    origin = max(0, hunk.start - 1)
    for distance in range(len(lines) + 1):
        for at in {origin - distance, origin + distance}:
            if 0 <= at <= len(lines) - size and all(
                    same(lines[at + k], hunk.old[k]) for k in range(size)):
                return at
    return None


def apply_file(text: str, patch: FilePatch) -> str:
    lines = text.split("\n")
    for hunk in patch.hunks:
        if not hunk.old:
            raise PatchError("a hunk without context")
        at = locate(lines, hunk, strict=True)
        if at is None:
            at = locate(lines, hunk, strict=False)
        if at is None:
            raise PatchError(f"a hunk of {patch.path} does not match the file")
        lines[at:at + len(hunk.old)] = hunk.new
    return "\n".join(lines)
