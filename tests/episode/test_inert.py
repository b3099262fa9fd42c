"""A workspace left on the host holds no setuid program, device node or FIFO."""

import os
import shutil
import socket
import stat
from pathlib import Path

from vtbench.episode.inert import make_inert


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_setuid_and_setgid_bits_are_cleared_and_contents_kept(tmp_path: Path) -> None:
    shell = tmp_path / "models" / "x"
    shell.parent.mkdir()
    shutil.copy("/bin/sh", shell)
    shell.chmod(0o6755)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o2775)
    defused = make_inert(tmp_path)
    assert mode(shell) == 0o755 and mode(shared) == 0o775
    assert shell.read_bytes() == Path("/bin/sh").read_bytes()
    assert defused.bits_cleared == 2 and "setuid" in (defused.summary() or "")


def test_fifos_sockets_and_device_nodes_are_removed_links_and_files_kept(
        tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "sock"))
    listener.close()
    made = [tmp_path / "pipe", tmp_path / "sock"]
    if os.geteuid() == 0:
        os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        made.append(tmp_path / "null")
    (tmp_path / "data.jsonl").write_text("{}\n")
    (tmp_path / "link").symlink_to("/etc/passwd")
    defused = make_inert(tmp_path)
    assert defused.special_removed == len(made)
    assert not any(os.path.lexists(path) for path in made)
    assert (tmp_path / "data.jsonl").read_text() == "{}\n"
    assert os.readlink(tmp_path / "link") == "/etc/passwd"


def test_a_clean_tree_reports_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    assert make_inert(tmp_path).summary() is None
