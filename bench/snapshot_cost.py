"""Snapshot cost of one validation on a workspace holding 1 GB of data.

Builds a workspace whose ``data/`` holds ``--gb`` of jsonl files, takes snapshot 0, then
times the snapshots a validation takes: unchanged data, one file edited, one file added.
Goal: ≤ 2 s per snapshot after the first.

    python bench/snapshot_cost.py --gb 1
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

from vtbench.workspace import git, snapshot

FILE_MB = 8


def fill(data: Path, gigabytes: float) -> None:
    data.mkdir(parents=True)
    line = b'{"prompt": "' + os.urandom(48).hex().encode() + b'", "completion": " 1"}\n'
    block = line * (FILE_MB * 1024 * 1024 // len(line))
    for index in range(int(gigabytes * 1024 / FILE_MB)):
        (data / f"part-{index:04d}.jsonl").write_bytes(os.urandom(16).hex().encode() + block)


def timed(git_dir: Path, workspace: Path, message: str) -> float:
    started = time.perf_counter()
    snapshot(git_dir, workspace, message)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace, git_dir = Path(tmp) / "workspace", Path(tmp) / "snapshots.git"
        fill(workspace / "data", args.gb)
        (workspace / "trainer").mkdir()
        (workspace / "trainer" / "config.toml").write_text("steps = 150\n")
        git_dir.mkdir()
        git(git_dir, workspace, "init", "--quiet", "--initial-branch=main")
        print(f"snapshot 0 ({args.gb:g} GB):      {timed(git_dir, workspace, 'snapshot 0'):.2f} s")
        print(f"unchanged workspace:        {timed(git_dir, workspace, 'validate 1'):.2f} s")
        (workspace / "trainer" / "config.toml").write_text("steps = 300\n")
        print(f"trainer config edited:      {timed(git_dir, workspace, 'validate 2'):.2f} s")
        with (workspace / "data" / "part-0000.jsonl").open("ab") as part:
            part.write(b'{"prompt": "x", "completion": " 2"}\n')
        print(f"one 8 MB data file edited:  {timed(git_dir, workspace, 'validate 3'):.2f} s")
        (workspace / "data" / "extra.jsonl").write_text('{"prompt": "y", "completion": " 3"}\n')
        print(f"one data file added:        {timed(git_dir, workspace, 'validate 4'):.2f} s")


if __name__ == "__main__":
    main()
