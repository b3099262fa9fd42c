"""Searching files for fingerprints: one Aho-Corasick pass over each file (and each member
of a .gz, .zip or wheel file), case-insensitively, compiled code skipped by its first
bytes. Many files are shared out over the host's cores, to worker processes that run this
module (``python -m vtbench.episode.fingerprint_search``: fingerprints and paths as JSON
on stdin, the first hit as JSON on stdout); the leak audit
(:mod:`vtbench.episode.leak_audit`) decides what to search."""

import gzip
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

MAX_MEMBER_BYTES = 256 * 1024 * 1024
COMPILED_MAGIC = (b"\x7fELF", b"!<arch>")
MAGIC_BYTES = max(len(magic) for magic in COMPILED_MAGIC)
PARALLEL_FROM = 2000
"""Files from which a search is shared out over the host's cores: below it, starting the
workers costs more than they save."""
MAX_WORKERS = 16

Hit = tuple[int, str, str]
"""(index of the path, where: the path and the archive member, the fingerprint)"""


class Search:
    """A set of fingerprints as one Aho-Corasick automaton."""

    def __init__(self, prints: set[str]) -> None:
        import ahocorasick

        self.prints = prints
        self.automaton = ahocorasick.Automaton()
        for text in sorted(prints):
            self.automaton.add_word(text, text)
        if prints:
            self.automaton.make_automaton()

    def first(self, path: str) -> tuple[str, str] | None:
        """Where ``path`` (or a member of it) holds a fingerprint, and which; else None."""
        for member, data in blobs(Path(path)):
            found = next(self.automaton.iter(data.decode("latin-1").lower()), None)
            if found is not None:
                return f"{path}{' :: ' + member if member else ''}", found[1]
        return None

    def first_hit(self, paths: Sequence[str], indices: Sequence[int]) -> Hit | None:
        """The first of ``paths`` that holds a fingerprint, with its index; else None."""
        for index, path in zip(indices, paths, strict=True):
            found = self.first(path)
            if found is not None:
                return index, *found
        return None


def gunzip(data: bytes) -> bytes | None:
    try:
        return gzip.decompress(data)[:MAX_MEMBER_BYTES]
    except (OSError, EOFError):
        return None


def blobs(path: Path) -> Iterator[tuple[str, bytes]]:
    """The file's bytes, and those of each member when it is a .gz, .zip or .whl file.
    Compiled code is known by its first bytes and not read further."""
    with path.open("rb") as file:
        if file.read(MAGIC_BYTES).startswith(COMPILED_MAGIC):
            return
        file.seek(0)
        data = file.read()
    yield "", data
    unpacked = gunzip(data) if path.suffix == ".gz" else None
    if unpacked is not None:
        yield "(gunzipped)", unpacked
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                for member in archive.infolist():
                    if member.file_size <= MAX_MEMBER_BYTES:
                        yield member.filename, archive.read(member)
        except (zipfile.BadZipFile, OSError, RuntimeError):
            pass


def usable_cores() -> int:
    return min(len(os.sched_getaffinity(0)), MAX_WORKERS)


def first_hit(search: Search, paths: Sequence[str], workers: int | None = None) -> Hit | None:
    """The first of ``paths`` (by their order) that holds a fingerprint, else None. From
    :data:`PARALLEL_FROM` paths on, ``workers`` processes (the host's usable cores) each
    read every n-th path in order and stop at their first hit: the lowest of those hits is
    the first, since every path before it was read by its worker."""
    workers = workers or usable_cores()
    if workers < 2 or len(paths) < PARALLEL_FROM:
        return search.first_hit(paths, range(len(paths)))
    with tempfile.TemporaryDirectory(prefix="vtbench-search-") as folder:
        running = [start_worker(search, paths, share, workers, Path(folder))
                   for share in range(workers)]
        hits = [finish_worker(worker) for worker in running]
    return min((hit for hit in hits if hit is not None), default=None)


def start_worker(search: Search, paths: Sequence[str], share: int, workers: int,
                 folder: Path) -> subprocess.Popen[bytes]:
    job = folder / f"share-{share}.json"
    job.write_text(json.dumps({"prints": sorted(search.prints), "start": share,
                               "step": workers, "paths": list(paths[share::workers])}))
    with job.open("rb") as stdin:
        return subprocess.Popen([sys.executable, "-m", __name__], stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish_worker(worker: subprocess.Popen[bytes]) -> Hit | None:
    out, err = worker.communicate()
    if worker.returncode != 0:
        raise OSError(f"a fingerprint search worker failed: {err.decode(errors='replace')}")
    found = json.loads(out)
    return None if found is None else (found[0], found[1], found[2])


def main() -> None:
    job = json.load(sys.stdin.buffer)
    paths, start, step = job["paths"], job["start"], job["step"]
    found = Search(set(job["prints"])).first_hit(
        paths, range(start, start + step * len(paths), step))
    json.dump(found, sys.stdout)


if __name__ == "__main__":
    main()
