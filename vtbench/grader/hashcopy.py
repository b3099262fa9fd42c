"""Copy one open file into another while hashing it, with hashing and writing overlapped.

The bytes hashed are exactly the bytes written: each chunk is read once into a buffer,
hashed, and handed to a writer thread that writes that same buffer. ``hashlib`` and
``os.write`` both release the GIL on large buffers, so a copy costs about
max(hash, write) instead of hash + write; full chunks are written with O_DIRECT where the
filesystem allows, which skips the page-cache copy and dirty-page throttling that
otherwise make the write, not the hash, the slow half (bench/intake_hash.py).
A ``check(chunk_index, view)`` callback sees every chunk before it is hashed and may
raise to abort the copy; the writer thread is always stopped and any write error
re-raised.
"""

import fcntl
import hashlib
import mmap
import os
import queue
import threading
from collections.abc import Callable

CHUNK = 8 * 1024 * 1024
BUFFERS = 3
DIRECT_ALIGN = 4096


def _try_direct(fd: int) -> bool:
    """Switch ``fd`` to O_DIRECT where the filesystem allows it; True if it did."""
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_DIRECT)
    except OSError:
        return False
    return True


def _buffered(fd: int) -> None:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_DIRECT)


class _Writer:
    """Writes full chunks with O_DIRECT (page-aligned buffers, no page-cache copy, no
    dirty pages to throttle on) and the unaligned tail, or everything on a filesystem
    without O_DIRECT, through the page cache."""

    def __init__(self, out_fd: int) -> None:
        self._fd = out_fd
        self._free: queue.Queue[mmap.mmap] = queue.Queue()
        self._full: queue.Queue[tuple[mmap.mmap, int] | None] = queue.Queue()
        for _ in range(BUFFERS):
            self._free.put(mmap.mmap(-1, CHUNK))
        self._direct = _try_direct(out_fd)
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="vtbench-hashcopy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._full.get()) is not None:
            buffer, n = item
            view = memoryview(buffer)
            try:
                if self._direct and n % DIRECT_ALIGN:
                    _buffered(self._fd)
                    self._direct = False
                written = 0
                while self._error is None and written < n:
                    written += os.write(self._fd, view[written:n])
            except OSError as err:
                self._error = err
            self._free.put(buffer)

    def buffer(self) -> mmap.mmap:
        return self._free.get()

    def write(self, buffer: mmap.mmap, n: int) -> None:
        self._full.put((buffer, n))

    def finish(self) -> None:
        self._full.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error


def copy_and_hash(
    src_fd: int, out_fd: int, check: Callable[[int, memoryview], None], size_hint: int
) -> tuple[str, int]:
    """Copy ``src_fd`` to ``out_fd`` from their current offsets; returns (sha256, bytes).

    ``size_hint`` (the size the file had when listed) only picks the strategy: small
    files skip the writer thread, whose buffers would cost more than they save.
    """
    if size_hint < CHUNK:
        return _copy_small(src_fd, out_fd, check, size_hint)
    digest = hashlib.sha256()
    writer = _Writer(out_fd)
    copied = index = 0
    try:
        while True:
            buffer = writer.buffer()
            n = os.readv(src_fd, [buffer])
            if not n:
                break
            view = memoryview(buffer)[:n]
            check(index, view)
            digest.update(view)
            writer.write(buffer, n)
            copied += n
            index += 1
    finally:
        writer.finish()
    return digest.hexdigest(), copied


def _copy_small(
    src_fd: int, out_fd: int, check: Callable[[int, memoryview], None], size_hint: int
) -> tuple[str, int]:
    digest = hashlib.sha256()
    buffer = bytearray(max(size_hint + 1, 4096))
    copied = index = 0
    while n := os.readv(src_fd, [buffer]):
        view = memoryview(buffer)[:n]
        check(index, view)
        digest.update(view)
        written = 0
        while written < n:
            written += os.write(out_fd, view[written:])
        copied += n
        index += 1
    return digest.hexdigest(), copied
