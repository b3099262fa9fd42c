"""Runner start on a task with large models: the workspace's copies and their leak audit.

Times what the runner does between its start and the agent's that grows with the models:
the task's digest (``load_prepared`` hashes the base model), copying ``models/base`` and
``models/initial`` into a fresh workspace, and the audit of that workspace, once with the
copies searched (as every episode did) and twice with the runner's copies trusted (their
sources searched, then cached: the second is every later episode). The runtime's audit is
not included (``vtbench prepare`` caches it). The task's splits must exist; its initial
model is the prepared one, or ``--initial`` (e.g. the base model: the same shape).

    python bench/workspace_audit.py --task humaneval --initial BASE_MODEL_FOLDER
"""

import argparse
import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from vtbench.episode.leak_audit import audit
from vtbench.models.base import resolve_base
from vtbench.prepare.digest import pack_digest
from vtbench.tasks import find_task
from vtbench.tasks.store import ensure_splits
from vtbench.workspace import create_workspace


@contextlib.contextmanager
def timed(step: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    print(f"{step:<52} {time.perf_counter() - started:6.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="humaneval")
    parser.add_argument("--initial", type=Path, help="the initial model (default: prepared)")
    args = parser.parse_args()
    task = find_task(args.task)
    ensure_splits(task)
    base = resolve_base(task.spec.base_model)
    if args.initial is None:
        from vtbench.prepare import load_prepared

        args.initial = load_prepared(task).initial_model
    size = sum(p.stat().st_size for folder in (base, args.initial) for p in folder.iterdir())
    print(f"{task.id}: models/base and models/initial hold {size / 2**20:.0f} MiB")
    with timed("task digest (hashes the base model)"):
        pack_digest(task)
    with tempfile.TemporaryDirectory() as scratch:
        for index, trusted in enumerate((False, True, True)):
            folder = Path(scratch) / f"episode-{index}"
            workspace = folder / "workspace"
            with timed(f"episode {index}: workspace with its model copies"):
                create_workspace(task, workspace, folder / "snapshots.git", base, args.initial)
            copies = {workspace / "models" / "base": base,
                      workspace / "models" / "initial": args.initial} if trusted else None
            how = "copies trusted" if trusted else "copies searched"
            with timed(f"episode {index}: audit of the workspace, {how}"):
                audit(task, [workspace], own=workspace, copies=copies)
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
