"""The workspace's own size-limited filesystem (needs root; skipped elsewhere)."""

import errno
import os
import shutil
import socket
import stat
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


def test_settle_clears_setuid_bits_and_drops_fifos_sockets_and_devices(
        disk: WorkspaceDisk) -> None:
    shell = disk.workspace / "x"
    shutil.copy("/bin/sh", shell)
    shell.chmod(0o6755)
    (disk.workspace / "shared").mkdir(mode=0o2775)
    (disk.workspace / "shared").chmod(0o2775)
    os.mkfifo(disk.workspace / "shared" / "pipe")
    os.mknod(disk.workspace / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(disk.workspace / "sock"))
    disk.settle()
    assert stat.S_IMODE(shell.stat().st_mode) == 0o755
    assert stat.S_IMODE((disk.workspace / "shared").stat().st_mode) == 0o775
    assert sorted(p.name for p in disk.workspace.rglob("*")) == ["shared", "x"]


def test_settle_defuses_a_workspace_that_had_no_disk_limit(tmp_path: Path) -> None:
    plain = WorkspaceDisk(tmp_path / "workspace")
    plain.workspace.mkdir()
    shutil.copy("/bin/sh", plain.workspace / "x")
    (plain.workspace / "x").chmod(0o4755)
    os.mkfifo(plain.workspace / "pipe")
    plain.settle()
    assert stat.S_IMODE((plain.workspace / "x").stat().st_mode) == 0o755
    assert [p.name for p in plain.workspace.iterdir()] == ["x"]


def test_settle_finishes_while_a_process_still_holds_a_workspace_file(tmp_path: Path) -> None:
    disk = WorkspaceDisk(tmp_path / "workspace", busy_wait_seconds=0.5)
    disk.create(0.05)
    (disk.workspace / "models").mkdir()
    with (disk.workspace / "models" / "late.safetensors").open("wb") as held:
        held.write(b"\0" * 1024)
        held.flush()
        disk.settle()
        assert not disk.mounted and not disk.image.exists()
    assert (disk.workspace / "models" / "late.safetensors").stat().st_size == 1024
