"""Intake hashing throughput ÷ ``sha256sum`` throughput on the same 1 GiB checkpoint.

Writes a 1 GiB safetensors file of random bytes into a temporary directory, flushes it
to disk and reads it once so both contenders start from the same page-cache state, then
times in one run: ``sha256sum`` on the file (the baseline), and a full candidate intake
of the directory (scan, copy into a content-addressed store while hashing, header checks, read-only,
publish). Also shows hash-only ``hashlib.file_digest`` for reference. Deletes
everything afterwards. Goal: ratio >= 1. Run: ``nice -n 10 .venv/bin/python bench/intake_hash.py``.
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vtbench.grader.intake import intake

SIZE = 2**30
CHUNK = 16 * 2**20


def write_checkpoint(path: Path) -> None:
    header = json.dumps({"w": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}).encode()
    header += b" " * (-len(header) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(header)) + header)
        left = SIZE - handle.tell()
        while left > 0:
            left -= handle.write(os.urandom(min(CHUNK, left)))


def timed(action: "object") -> float:
    started = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="vtbench-bench-"))
    try:
        model = root / "model"
        model.mkdir()
        checkpoint = model / "model.safetensors"
        write_checkpoint(checkpoint)
        (model / "config.json").write_text('{"model_type": "gpt2"}')
        os.sync()  # flush the generated file so its writeback does not throttle the copy
        subprocess.run(["cat", str(checkpoint)], stdout=subprocess.DEVNULL, check=True)
        baseline = timed(lambda: subprocess.run(["sha256sum", str(checkpoint)],
                                                stdout=subprocess.DEVNULL, check=True))
        with checkpoint.open("rb") as handle:
            hash_only = timed(lambda: hashlib.file_digest(handle, "sha256"))
        full = timed(lambda: intake(model, "model", store=root / "cas"))
    finally:
        for dirpath, _, _ in os.walk(root):
            os.chmod(dirpath, 0o700)
        shutil.rmtree(root)
    mib = SIZE / 2**20
    print(f"sha256sum           {baseline:6.2f} s  {mib / baseline:7.0f} MiB/s  (baseline)")
    print(f"hashlib file_digest {hash_only:6.2f} s  {mib / hash_only:7.0f} MiB/s")
    print(f"intake (copy+hash)  {full:6.2f} s  {mib / full:7.0f} MiB/s")
    print(f"ratio intake/sha256sum throughput = {baseline / full:.2f} (goal >= 1)")
    sys.exit(0 if baseline / full >= 1 else 1)


if __name__ == "__main__":
    main()
