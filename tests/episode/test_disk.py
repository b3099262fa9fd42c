"""The workspace's own size-limited filesystem (needs root; skipped elsewhere)."""

import errno
import os
from pathlib import Path

import pytest

from vtbench.episode.disk import WorkspaceDisk, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


@pytest.fixture
def disk(tmp_path: Path):
    made = WorkspaceDisk(tmp_path / "workspace")
    made.create(0.05)
    yield made
    made.detach()


def test_a_write_beyond_the_limit_fails_with_no_space(disk: WorkspaceDisk) -> None:
    assert disk.mounted and os.listdir(disk.workspace) == []
    with pytest.raises(OSError) as failure, (disk.workspace / "big").open("wb") as out:
        for _ in range(64):
            out.write(b"\0" * 1024 * 1024)
            out.flush()
            os.fsync(out.fileno())
    assert failure.value.errno == errno.ENOSPC


def test_the_image_costs_only_what_is_written(disk: WorkspaceDisk) -> None:
    assert disk.image.stat().st_blocks * 512 < 8 * 1024 * 1024


def test_detach_keeps_the_contents_for_a_resumed_episode(disk: WorkspaceDisk) -> None:
    (disk.workspace / "notes.txt").write_text("kept")
    disk.detach()
    assert not disk.mounted and not (disk.workspace / "notes.txt").exists()
    disk.attach()
    assert (disk.workspace / "notes.txt").read_text() == "kept"


def test_settle_leaves_a_plain_folder_and_deletes_the_image(disk: WorkspaceDisk) -> None:
    (disk.workspace / "data").mkdir()
    (disk.workspace / "data" / "train.jsonl").write_text("{}\n")
    os.mkfifo(disk.workspace / "pipe")
    (disk.workspace / "link").symlink_to("/etc/passwd")
    disk.settle()
    assert not disk.mounted and not disk.image.exists()
    assert (disk.workspace / "data" / "train.jsonl").read_text() == "{}\n"
    assert (disk.workspace / "link").is_symlink()
    assert not (disk.workspace.with_name("workspace.copy")).exists()
