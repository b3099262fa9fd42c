"""Candidate intake: copy a model or harness directory into the content-addressed store.

Trusted code. It trusts nothing in the source directory: names, types, sizes and bytes
are all checked, and nothing is ever unpickled, imported or executed. It trusts the
kernel's ``O_NOFOLLOW``/``fstat`` and the private store's permissions.

Guarantees:

* What is evaluated is the stored copy (``cas/<tree hash>/files``), never the workspace:
  later edits of the source change nothing stored. The copy is hashed while it is
  written (one read of each source file) and made read-only before it becomes visible
  under its hash (an atomic rename), so a stored tree always matches its name.
* The tree hash is ``sha256`` over ``"vtbench-tree-v1\\n"`` followed by one line
  ``<relative path>\\0<sha256 of the file>\\n`` per file in sorted path order. Empty
  directories and file modes are not part of a candidate.
* Refused, with :class:`~vtbench.errors.CandidateRefused` naming the file: symbolic links,
  device files, FIFOs and sockets, pickles (by suffix, by a pickle protocol header, or a
  zip archive holding a ``.pkl``), files over the per-file limit by size *or* allocated
  blocks, trees over the total limit (a huge sparse file is refused from its ``st_size``
  before a byte is read), and for models: files other than safetensors/JSON/tokenizer
  files, no safetensors weights, and whatever the model loader itself refuses
  (:func:`vtbench.models.checkpoint.check_checkpoint`, run on the stored copy: configs
  asking for remote code, corrupt safetensors, shards outside the directory, no
  ``config.json``).
* Paths cannot leave the directory: the walk goes through directory file descriptors
  opened with ``O_NOFOLLOW`` and checks each opened object against the ``lstat`` that
  classified it, so a directory or file swapped for a symlink mid-intake is refused.
  Hard links are copied as plain files (the sandbox can only link files it can read).
"""

import hashlib
import json
import os
import shutil
import stat
import struct
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vtbench import boundedjson, layout
from vtbench.errors import CandidateRefused, CheckpointError
from vtbench.grader.hashcopy import copy_and_hash
from vtbench.models.checkpoint import PICKLE_SUFFIXES, check_checkpoint

Kind = Literal["model", "harness"]
Stop = Callable[[], bool]
"""Asked between chunks of a copy: True stops the intake (its episode closed)."""
TREE_PREFIX = b"vtbench-tree-v1\n"
MODEL_SUFFIXES = (".safetensors", ".json", ".txt", ".model", ".md", ".jinja", ".tiktoken",
                  ".yml", ".yaml")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class IntakeLimits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    max_file_bytes: int = Field(16 * 2**30, ge=1)
    """Largest single file, by size and by allocated blocks."""
    max_total_bytes: int = Field(64 * 2**30, ge=1)
    """Largest candidate, all files together."""
    max_files: int = Field(10_000, ge=1)


class StoredCandidate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hash: str
    path: Path
    """The read-only stored tree (``cas/<hash>/files``); evaluate this, not the source."""
    files: dict[str, str]
    """Relative path -> sha256 of its bytes."""
    total_bytes: int


def _refuse(rel: str, why: str) -> CandidateRefused:
    return CandidateRefused(f"candidate refused: {rel}: {why}",
                            hint="candidates hold safetensors, JSON and tokenizer files only")


def _same_object(opened: os.stat_result, listed: os.stat_result, rel: str) -> None:
    if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
        raise _refuse(rel, "changed while it was being read")


def _walk(dir_fd: int, prefix: str) -> Iterator[tuple[str, int, str, os.stat_result]]:
    """Every entry below ``dir_fd`` as (relative path, parent fd, name, lstat), sorted."""
    for name in sorted(os.listdir(dir_fd)):
        rel = prefix + name
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            raise _refuse(ascii(rel), "file name is not valid UTF-8") from None
        listed = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        yield rel, dir_fd, name, listed
        if stat.S_ISDIR(listed.st_mode):
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                raise _refuse(rel, "changed while it was being read") from None
            try:
                _same_object(os.fstat(sub), listed, rel)
                yield from _walk(sub, rel + "/")
            finally:
                os.close(sub)


def _kind_of(mode: int) -> str:
    for test, word in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device file"),
                       (stat.S_ISBLK, "a block device file"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def _check_entry(rel: str, listed: os.stat_result, kind: Kind, limits: IntakeLimits) -> None:
    """Refuse by type, name and size, before any byte of the file is read."""
    if stat.S_ISDIR(listed.st_mode):
        return
    if not stat.S_ISREG(listed.st_mode):
        raise _refuse(rel, f"is {_kind_of(listed.st_mode)}")
    lower = rel.lower()
    if Path(lower).suffix in PICKLE_SUFFIXES:
        raise _refuse(rel, "pickle files are never loaded; save weights as safetensors")
    if kind == "model" and not lower.endswith(MODEL_SUFFIXES):
        raise _refuse(rel, "not a safetensors, JSON or tokenizer file")
    allocated = listed.st_blocks * 512
    if max(listed.st_size, allocated) > limits.max_file_bytes:
        raise _refuse(rel, f"{max(listed.st_size, allocated)} bytes is over the "
                           f"{limits.max_file_bytes}-byte file limit")


def _scan(root_fd: int, kind: Kind, limits: IntakeLimits) -> dict[str, os.stat_result]:
    """Pass 1: classify every entry and check every limit; returns the regular files."""
    files: dict[str, os.stat_result] = {}
    total = 0
    for rel, _, _, listed in _walk(root_fd, ""):
        _check_entry(rel, listed, kind, limits)
        if stat.S_ISREG(listed.st_mode):
            files[rel] = listed
            total += listed.st_size
            if total > limits.max_total_bytes:
                raise _refuse(rel, f"candidate is over the {limits.max_total_bytes}-byte limit")
            if len(files) > limits.max_files:
                raise _refuse(rel, f"candidate has more than {limits.max_files} files")
    if kind == "model" and not any(rel.endswith(".safetensors") for rel in files):
        raise CandidateRefused("candidate refused: no *.safetensors weights in the model "
                               "directory", hint="save the model with safe_serialization=True")
    return files


def _looks_pickled(head: bytes) -> bool:
    return len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def _copy_file(src_fd: int, dest: Path, rel: str, limit: int, size_hint: int,
               stop: Stop | None) -> str:
    """Copy one open file to ``dest`` while hashing it; returns its sha256.

    A safetensors file is exempt from the pickle-header test: its first 8 bytes are a
    header length (e.g. 896 = ``80 03 ...``), and its header is checked as JSON later.
    """
    sniff = not rel.endswith(".safetensors")
    copied = 0

    def check(index: int, chunk: memoryview) -> None:
        nonlocal copied
        if sniff and index == 0 and _looks_pickled(bytes(chunk[:2])):
            raise _refuse(rel, "starts with a pickle protocol header")
        if stop is not None and stop():
            raise CandidateRefused("candidate refused: the intake was stopped because the "
                                   "episode closed", hint="it takes no more work")
        copied += len(chunk)
        if copied > limit:
            raise _refuse(rel, f"grew over the {limit}-byte file limit while read")

    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        if size_hint > 0:
            # Allocating up front makes ext4 skip per-page delayed allocation: the copy
            # costs a tenth of the kernel time (bench/intake_hash.py).
            os.posix_fallocate(out, 0, size_hint)
        digest, copied = copy_and_hash(src_fd, out, check, size_hint)
        if copied != size_hint:
            os.ftruncate(out, copied)
        return digest
    finally:
        os.close(out)


def _copy_tree(root_fd: int, files: dict[str, os.stat_result], dest: Path,
               limits: IntakeLimits, stop: Stop | None) -> dict[str, str]:
    """Pass 2: copy and hash each file found by the scan, re-checking its identity."""
    hashes: dict[str, str] = {}
    budget = limits.max_total_bytes
    for rel, parent_fd, name, listed in _walk(root_fd, ""):
        if rel not in files:
            if not stat.S_ISDIR(listed.st_mode):
                raise _refuse(rel, "appeared while the candidate was being read")
            continue
        try:
            src = os.open(name, _FILE_FLAGS, dir_fd=parent_fd)
        except OSError as err:
            raise _refuse(rel, f"cannot be opened safely ({err.strerror})") from None
        try:
            opened = os.fstat(src)
            _same_object(opened, files[rel], rel)
            if not stat.S_ISREG(opened.st_mode):
                raise _refuse(rel, f"is {_kind_of(opened.st_mode)}")
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            limit = min(limits.max_file_bytes, budget)
            hashes[rel] = _copy_file(src, target, rel, limit, opened.st_size, stop)
            budget -= target.stat().st_size
        finally:
            os.close(src)
    return hashes


def tree_hash(files: dict[str, str]) -> str:
    digest = hashlib.sha256(TREE_PREFIX)
    for rel in sorted(files):
        digest.update(f"{rel}\0{files[rel]}\n".encode())
    return digest.hexdigest()


def _json_of(path: Path, rel: str) -> bytes | None:
    """The JSON text of a JSON file or of a safetensors header (None: none to read)."""
    if rel.endswith(".json"):
        return path.read_bytes()
    if not rel.endswith(".safetensors"):
        return None
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            return None
        (length,) = struct.unpack("<Q", prefix)
        return handle.read(length) if length <= min(path.stat().st_size - 8, 2**27) else None


def _check_nesting(files_dir: Path, files: dict[str, str]) -> None:
    """Refuse JSON (files, safetensors headers) nested deeper than any reader recurses."""
    for rel in sorted(files):
        text = _json_of(files_dir / rel, rel)
        if text is None:
            continue
        try:
            boundedjson.loads(text)
        except boundedjson.TooDeep as err:
            raise _refuse(rel, f"JSON {err}") from None
        except ValueError:
            continue  # malformed JSON: the checkpoint check below names it


def _check_model_contents(files_dir: Path, files: dict[str, str]) -> None:
    """The model loader's own checks, on the stored (no longer changeable) copy."""
    _check_nesting(files_dir, files)
    try:
        check_checkpoint(files_dir)
    except CheckpointError as err:
        message = str(err).replace(f"{files_dir.resolve()}/", "")
        raise CandidateRefused(f"candidate refused: {message}", hint=err.hint) from None


def _check_any_zip(files_dir: Path, files: dict[str, str]) -> None:
    for rel in files:
        path = files_dir / rel
        with path.open("rb") as handle:
            if handle.read(4) != b"PK\x03\x04":
                continue
        try:
            names = zipfile.ZipFile(path).namelist()
        except zipfile.BadZipFile:
            continue
        if any(name.endswith((".pkl", ".pickle")) for name in names):
            raise _refuse(rel, "is an archive holding a pickle (a torch.save file?)")


def _make_read_only(root: Path) -> None:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o444)
        os.chmod(dirpath, 0o555)


def _remove(path: Path) -> None:
    for dirpath, _, _ in os.walk(path):
        os.chmod(dirpath, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def intake(source: Path, kind: Kind, limits: IntakeLimits | None = None,
           store: Path | None = None) -> StoredCandidate:
    """Copy ``source`` into the store (or find it there) and return the stored candidate."""
    try:
        root_fd = os.open(source, _DIR_FLAGS)
    except OSError as err:
        raise _refuse(str(source), f"not a directory that can be opened ({err.strerror})") from None
    try:
        return _intake_fd(root_fd, kind, limits or IntakeLimits(), store)
    finally:
        os.close(root_fd)


def _intake_fd(root_fd: int, kind: Kind, limits: IntakeLimits,
               store: Path | None, stop: Stop | None = None) -> StoredCandidate:
    store = store or layout.candidate_store()
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    incoming = store / f".incoming-{uuid.uuid4().hex}"
    try:
        files = _scan(root_fd, kind, limits)
        (incoming / "files").mkdir(parents=True)
        hashes = _copy_tree(root_fd, files, incoming / "files", limits, stop)
        _check_any_zip(incoming / "files", hashes)
        if kind == "model":
            _check_model_contents(incoming / "files", hashes)
        return _publish(incoming, store, hashes)
    finally:
        if incoming.exists():
            _remove(incoming)


def _publish(incoming: Path, store: Path, hashes: dict[str, str]) -> StoredCandidate:
    name = tree_hash(hashes)
    total = sum((incoming / "files" / rel).stat().st_size for rel in hashes)
    manifest = {"hash": name, "files": hashes, "total_bytes": total}
    (incoming / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    _make_read_only(incoming)
    final = store / name
    try:
        os.rename(incoming, final)
    except OSError:
        if not final.is_dir():  # anything but "already stored" is a real error
            raise
    candidate = stored(name, store)
    assert candidate is not None
    return candidate


def intake_from(workspace: Path, relative: str, kind: Kind,
                limits: IntakeLimits | None = None, store: Path | None = None,
                stop: Stop | None = None) -> StoredCandidate:
    """Intake ``workspace/relative``, refusing a path that would leave the workspace.

    Each component is opened relative to the previous one with ``O_NOFOLLOW``, so no
    symlink anywhere on the way is followed, even one swapped in during the call.
    """
    if "\x00" in relative:
        raise _refuse(ascii(relative), "not a valid path")
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts:
        raise _refuse(relative, "path leaves the workspace")
    fd = os.open(workspace, _DIR_FLAGS)
    try:
        for part in parts:
            try:
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as err:
                raise _refuse(relative, f"{part}: {_open_failure(fd, part, err)}") from None
            os.close(fd)
            fd = next_fd
        return _intake_fd(fd, kind, limits or IntakeLimits(), store, stop)
    finally:
        os.close(fd)


def _open_failure(dir_fd: int, name: str, err: OSError) -> str:
    try:
        listed = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return err.strerror or "cannot be opened"
    return f"is {_kind_of(listed.st_mode)}" if not stat.S_ISDIR(listed.st_mode) else str(err)


def stored(name: str, store: Path | None = None) -> StoredCandidate | None:
    """The stored candidate with this tree hash, or None if it is not in the store."""
    if len(name) != 64 or any(c not in "0123456789abcdef" for c in name):
        return None
    root = (store or layout.candidate_store()) / name
    try:
        manifest = json.loads((root / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return StoredCandidate(hash=name, path=root / "files", files=manifest["files"],
                           total_bytes=manifest["total_bytes"])


def verify(name: str, store: Path | None = None) -> bool:
    """Re-hash a stored candidate: True only if every byte still matches its name."""
    candidate = stored(name, store)
    if candidate is None:
        return False
    actual: dict[str, str] = {}
    for dirpath, _, filenames in os.walk(candidate.path):
        for filename in filenames:
            path = Path(dirpath) / filename
            with path.open("rb") as handle:
                rel = path.relative_to(candidate.path).as_posix()
                actual[rel] = hashlib.file_digest(handle, "sha256").hexdigest()
    return actual == candidate.files and tree_hash(actual) == name


def sweep_incoming(store: Path | None = None) -> list[str]:
    """Remove the half-copied ``.incoming-*`` folders an interrupted intake left behind.

    Only safe while no intake runs against ``store``; returns the names removed."""
    root = store or layout.candidate_store()
    litter = sorted(root.glob(".incoming-*")) if root.is_dir() else []
    for folder in litter:
        _remove(folder)
    return [folder.name for folder in litter]


def remove_stored(name: str, store: Path | None = None) -> int:
    """Delete a stored candidate; returns the bytes it held (0 when it was not stored).

    The caller makes sure nothing uses it: the store has no reference count of its own."""
    candidate = stored(name, store)
    if candidate is None:
        return 0
    _remove(candidate.path.parent)
    return candidate.total_bytes
