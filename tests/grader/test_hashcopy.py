"""The overlapped copy-and-hash used by intake, on real files."""

import hashlib
import os
import threading
from pathlib import Path

import pytest

from vtbench.grader.hashcopy import CHUNK, copy_and_hash


def no_check(index: int, chunk: memoryview) -> None:
    return None


@pytest.mark.parametrize("size", [0, 1000, CHUNK, 2 * CHUNK + 123])
def test_copy_is_byte_identical_and_hashed(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    (tmp_path / "src").write_bytes(data)
    src = os.open(tmp_path / "src", os.O_RDONLY)
    out = os.open(tmp_path / "dst", os.O_WRONLY | os.O_CREAT)
    try:
        digest, copied = copy_and_hash(src, out, no_check, size_hint=size)
    finally:
        os.close(src)
        os.close(out)
    assert (digest, copied) == (hashlib.sha256(data).hexdigest(), size)
    assert (tmp_path / "dst").read_bytes() == data


@pytest.mark.parametrize("size", [1000, 3 * CHUNK])
def test_write_error_is_raised_not_swallowed(tmp_path: Path, size: int) -> None:
    (tmp_path / "src").write_bytes(b"x" * size)
    (tmp_path / "dst").write_bytes(b"")
    src = os.open(tmp_path / "src", os.O_RDONLY)
    read_only = os.open(tmp_path / "dst", os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            copy_and_hash(src, read_only, no_check, size_hint=size)
    finally:
        os.close(src)
        os.close(read_only)


def test_a_check_that_raises_stops_the_copy_and_its_writer_thread(tmp_path: Path) -> None:
    (tmp_path / "src").write_bytes(b"x" * (3 * CHUNK))
    src = os.open(tmp_path / "src", os.O_RDONLY)
    out = os.open(tmp_path / "dst", os.O_WRONLY | os.O_CREAT)

    def refuse_second(index: int, chunk: memoryview) -> None:
        if index == 1:
            raise ValueError("stop")

    try:
        with pytest.raises(ValueError, match="stop"):
            copy_and_hash(src, out, refuse_second, size_hint=3 * CHUNK)
    finally:
        os.close(src)
        os.close(out)
    assert not [t for t in threading.enumerate() if t.name == "vtbench-hashcopy"]
    assert (tmp_path / "dst").stat().st_size <= CHUNK
