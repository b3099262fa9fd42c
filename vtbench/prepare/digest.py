"""What a task's prepared systems were built from, so that a changed task is not served
stale models and scores.

The digest covers every file of the task pack (``task.toml``, builder, scorer, reference,
the public data, trainer and harness sources, shared folders such as ``../_tiny`` or another
pack whose builder and scorer it borrows) and the base model's files; a base model from the
Hugging Face cache by its commit and the content hashes its blobs are named by.
``prepare`` rebuilds the systems and scores of a task whose digest changed (or was never
recorded); the splits stay as they are, so episodes remain
comparable (delete ``splits/`` in the task's store to draw new ones). An episode refuses
to start on a stale preparation.
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

from vtbench import layout
from vtbench.models.base import resolve_base
from vtbench.spec import base_model_kind
from vtbench.tasks.materialize import COMPONENTS
from vtbench.tasks.registry import Task
from vtbench.tasks.store import atomic_write


def _pack_folders(task: Task) -> list[Path]:
    """The task folder and what it shares from outside it: component sources, and the
    folders of a builder, scorer or reference it borrows from another pack."""
    root = task.root.resolve()
    spec = task.spec
    sources = {(root / source).resolve() for name in COMPONENTS
               for source in getattr(spec.components, name).sources}
    modules = {(root / module).resolve().parent
               for module in (spec.builder.module, spec.scorer.module, spec.reference.module)}
    outside = sorted(s for s in sources | modules if not s.is_relative_to(root))
    widest = [s for s in outside if not any(s != o and s.is_relative_to(o) for o in outside)]
    return [root, *widest]


def pack_digest(task: Task) -> str:
    """sha256 over the relative paths and contents of the task pack and its base model, and
    the serving backend where it is not the default (the same weights may score otherwise
    when another engine serves them)."""
    digest = hashlib.sha256()
    if task.serving_backend != "transformers":
        digest.update(f"serving backend {task.serving_backend}\0".encode())
    for folder in _pack_folders(task):
        _hash_folder(digest, folder)
    name = task.spec.base_model
    base = resolve_base(name).resolve()
    if base_model_kind(name) == "hub":
        _hash_snapshot(digest, name, base)
    else:
        _hash_folder(digest, base)
    return digest.hexdigest()


def _hash_folder(digest: "hashlib._Hash", folder: Path) -> None:
    files = [folder] if folder.is_file() else sorted(
        p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        digest.update(f"{folder.name}/{path.relative_to(folder)}\0".encode())
        _hash_content(digest, path)


def _hash_content(digest: "hashlib._Hash", path: Path) -> None:
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)


def _hash_snapshot(digest: "hashlib._Hash", name: str, snapshot: Path) -> None:
    """A hub snapshot by its commit and, per file, the blob it links to: the cache names
    each blob by its content hash (sha256 for large files, git's sha1 for the others), so a
    9B base is not read again at every episode start. A file stored in place (a cache on a
    filesystem without symlinks) is read."""
    digest.update(f"hub:{name}@{snapshot.name}\0".encode())
    for path in sorted(p for p in snapshot.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(snapshot)}\0".encode())
        if path.is_symlink():
            digest.update(f"blob:{Path(os.readlink(path)).name}\0".encode())
        else:
            _hash_content(digest, path)


def _digest_path(task: Task) -> Path:
    return layout.task_store(task.id) / "pack.sha256"


def recorded_digest(task: Task) -> str | None:
    """The digest of the pack the task's systems were built from (None: never prepared)."""
    path = _digest_path(task)
    return path.read_text().strip() if path.exists() else None


def is_current(task: Task) -> bool:
    """Whether the task's prepared systems were built from the task as it is now."""
    return recorded_digest(task) == pack_digest(task)


def pack_record(task_id: str) -> Path:
    """Where the pack prepared under ``task_id`` lies, and its digest (JSON)."""
    return layout.task_store(task_id) / "pack.json"


def remember_pack(task: Task, digest: str) -> None:
    """Record the pack's folder and digest under its id, so that the grader finds the task
    from the id its ledger keeps (:func:`vtbench.prepare.prepared_by_id`)."""
    record = {"root": str(task.root), "digest": digest}
    path = pack_record(task.id)
    if not path.exists() or json.loads(path.read_text()) != record:
        atomic_write(path, json.dumps(record), mode=0o644)


def forget_stale(task: Task) -> bool:
    """Remove systems and scores built from another version of the task; record this
    version. Returns whether anything was removed."""
    current = pack_digest(task)
    remember_pack(task, current)
    if recorded_digest(task) == current:
        return False
    store = layout.task_store(task.id)
    stale = (store / "systems").exists() or (store / "scores.json").exists()
    shutil.rmtree(store / "systems", ignore_errors=True)
    (store / "scores.json").unlink(missing_ok=True)
    atomic_write(_digest_path(task), current + "\n", mode=0o644)
    return stale
