"""The private store of prepared tasks (trusted; never visible to a research agent).

Layout under ``$VTBENCH_HOME``::

    secret                     per-installation secret (0600); splits derive from it
    tasks/<id>/splits/val.jsonl, test.jsonl
    tasks/<id>/systems/<name>/model/, harness/    cached initial, reference, ablation systems
    tasks/<id>/scores.json     val/test scores of those systems

Splits cannot be regenerated without the secret: each split's generator is seeded with
HMAC-SHA256(secret, task id + split name). Every file is written to a temporary name and
renamed into place, so a crash never leaves a half-written file behind.
"""

import hashlib
import hmac
import inspect
import json
import os
import random
import secrets
import tempfile
from collections.abc import Iterable
from pathlib import Path

from vtbench import layout
from vtbench.tasks.registry import Task
from vtbench.tasks.splits import public_exclusions

SPLITS = ("val", "test")


def atomic_write(path: Path, text: str, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def installation_secret() -> bytes:
    """The per-installation secret, created on first use."""
    path = layout.secret_file()
    if not path.exists():
        layout.home().mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(path, secrets.token_hex(32))
    return bytes.fromhex(path.read_text().strip())


def split_rng(task_id: str, split: str, secret: bytes) -> random.Random:
    digest = hmac.new(secret, f"{task_id}/{split}".encode(), hashlib.sha256).digest()
    return random.Random(int.from_bytes(digest, "big"))


def build_splits(task: Task, secret: bytes) -> dict[str, list[dict]]:
    """Val then test, each disjoint from the public data and from each other. A builder
    whose ``build_split`` takes ``split`` is told which it draws (repofix draws each from
    its own libraries)."""
    exclude = public_exclusions(task)
    built = {}
    for split in SPLITS:
        size = getattr(task.spec.splits, split)
        named = {"split": split} if "split" in inspect.signature(
            task.builder.build_split).parameters else {}
        items = task.builder.build_split(split_rng(task.id, split, secret), size, exclude,
                                         **named)
        built[split] = [{"id": f"{split}-{i:05d}", **item} for i, item in enumerate(items)]
    return built


def split_path(task_id: str, split: str) -> Path:
    return layout.task_store(task_id) / "splits" / f"{split}.jsonl"


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    atomic_write(path, "".join(json.dumps(row) + "\n" for row in rows))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ensure_splits(task: Task) -> None:
    if all(split_path(task.id, split).exists() for split in SPLITS):
        return
    for split, items in build_splits(task, installation_secret()).items():
        write_jsonl(split_path(task.id, split), items)


def load_split(task: Task, split: str) -> list[dict]:
    from vtbench.errors import NotPrepared

    path = split_path(task.id, split)
    if not path.exists():
        raise NotPrepared(f"task {task.id!r} has no {split} split",
                          hint=f"run: vtbench prepare --task {task.id}")
    return read_jsonl(path)
