"""Candidate intake against real files: what is stored, and every refusal naming its file."""

import json
import os
import socket
import stat
import struct
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from vtbench import layout
from vtbench.errors import CandidateRefused
from vtbench.grader import intake as intake_module
from vtbench.grader.intake import IntakeLimits, intake, intake_from, stored, verify


def make_model(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    save_file({"w": np.arange(12, dtype=np.float32).reshape(3, 4)},
              str(root / "model.safetensors"))
    (root / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 1}))
    (root / "tokenizer.json").write_text("{}")
    return root


def make_harness(root: Path) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "run.py").write_text("print('hi')\n")
    (root / "lib" / "prompt.txt").write_text("Q: {q}\nA:")
    return root


def store_is_empty() -> bool:
    store = layout.candidate_store()
    return not store.exists() or not any(store.iterdir())


def refused(source: Path, kind: str = "model", **limits: int) -> str:
    with pytest.raises(CandidateRefused) as caught:
        intake(source, kind, IntakeLimits(**limits))  # type: ignore[arg-type]
    assert store_is_empty(), "a refused candidate must leave nothing in the store"
    return str(caught.value)


def test_model_is_stored_read_only_under_its_tree_hash(tmp_path: Path) -> None:
    candidate = intake(make_model(tmp_path / "m"), "model")
    assert candidate.path == layout.candidate_store() / candidate.hash / "files"
    assert sorted(candidate.files) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert candidate.files["tokenizer.json"] == intake_module.hashlib.sha256(b"{}").hexdigest()
    assert candidate.hash == intake_module.tree_hash(candidate.files)
    for path in [candidate.path, *candidate.path.rglob("*")]:
        writable = stat.S_IMODE(path.stat().st_mode) & 0o222
        assert not writable, f"{path} is writable"
    assert verify(candidate.hash)


def test_later_edits_in_the_source_do_not_change_what_is_stored(tmp_path: Path) -> None:
    source = make_model(tmp_path / "m")
    first = intake(source, "model")
    before = (first.path / "config.json").read_bytes()
    (source / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (source / "extra.json").write_text("{}")
    assert (first.path / "config.json").read_bytes() == before
    assert not (first.path / "extra.json").exists()
    assert verify(first.hash)
    second = intake(source, "model")
    assert second.hash != first.hash
    assert stored(first.hash) == first


def test_the_same_tree_is_stored_once_whatever_its_source_path(tmp_path: Path) -> None:
    one = intake(make_model(tmp_path / "a"), "model")
    two = intake(make_model(tmp_path / "b"), "model")
    assert one.hash == two.hash
    assert [p.name for p in layout.candidate_store().iterdir()] == [one.hash]


def test_harness_keeps_subfolders_and_may_hold_code(tmp_path: Path) -> None:
    candidate = intake(make_harness(tmp_path / "h"), "harness")
    assert sorted(candidate.files) == ["lib/prompt.txt", "run.py"]
    assert (candidate.path / "lib" / "prompt.txt").read_text() == "Q: {q}\nA:"


def test_tampering_with_the_stored_copy_is_detected(tmp_path: Path) -> None:
    candidate = intake(make_harness(tmp_path / "h"), "harness")
    target = candidate.path / "run.py"
    os.chmod(target, 0o644)
    target.write_text("print('evil')\n")
    assert not verify(candidate.hash)
    assert not verify("0" * 64)


@pytest.mark.parametrize("name", ["pytorch_model.bin", "w.pt", "w.PTH", "state.pkl", "last.ckpt"])
def test_pickle_by_suffix_is_refused_by_name(tmp_path: Path, name: str) -> None:
    source = make_harness(tmp_path / "h")
    (source / "lib" / name).write_bytes(b"not even a pickle")
    assert f"lib/{name}: pickle files are never loaded" in refused(source, "harness")


def test_pickle_by_protocol_header_is_refused_whatever_its_name(tmp_path: Path) -> None:
    import pickle

    source = make_harness(tmp_path / "h")
    (source / "data.dat").write_bytes(pickle.dumps({"a": 1}, protocol=4))
    assert "data.dat: starts with a pickle protocol header" in refused(source, "harness")


def test_zip_archive_holding_a_pickle_is_refused(tmp_path: Path) -> None:
    source = make_harness(tmp_path / "h")
    with zipfile.ZipFile(source / "weights.zip", "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    assert "weights.zip: is an archive holding a pickle" in refused(source, "harness")


def test_symlink_into_the_private_store_is_refused(tmp_path: Path, private_store: Path) -> None:
    secret = private_store / "secret"
    secret.write_text("labels")
    source = make_model(tmp_path / "m")
    (source / "vocab.json").symlink_to(secret)
    assert "vocab.json: is a symbolic link" in refused(source)


def test_symlinked_directory_is_refused(tmp_path: Path, private_store: Path) -> None:
    source = make_harness(tmp_path / "h")
    (source / "store").symlink_to(private_store, target_is_directory=True)
    assert "store: is a symbolic link" in refused(source, "harness")


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    source = make_harness(tmp_path / "h")
    os.mkfifo(source / "pipe")
    assert "pipe: is a FIFO" in refused(source, "harness")


def test_device_file_is_refused(tmp_path: Path) -> None:
    source = make_harness(tmp_path / "h")
    try:
        os.mknod(source / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    assert "zero: is a character device file" in refused(source, "harness")


def test_unix_socket_is_refused(tmp_path: Path) -> None:
    source = make_harness(tmp_path / "h")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(source / "s"))
        assert "s: is a socket" in refused(source, "harness")


def test_huge_sparse_file_is_refused_before_copying(tmp_path: Path) -> None:
    source = make_model(tmp_path / "m")
    with (source / "huge.safetensors").open("wb") as handle:
        handle.truncate(2**40)  # 1 TiB apparent, a few blocks allocated
    started = time.monotonic()
    message = refused(source)
    assert "huge.safetensors: 1099511627776 bytes is over the" in message
    assert time.monotonic() - started < 5


def test_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    source = make_harness(tmp_path / "h")
    (source / "big.txt").write_bytes(b"x" * 5000)
    assert "big.txt: 8192 bytes is over the 4096-byte file limit" in refused(
        source, "harness", max_file_bytes=4096)


def test_candidate_over_the_total_limit_is_refused(tmp_path: Path) -> None:
    source = make_harness(tmp_path / "h")
    for index in range(3):
        (source / f"part{index}.txt").write_bytes(b"x" * 3000)
    assert "over the 8000-byte limit" in refused(source, "harness", max_total_bytes=8000)


def test_candidate_with_too_many_files_is_refused(tmp_path: Path) -> None:
    source = make_harness(tmp_path / "h")
    for index in range(5):
        (source / f"f{index}.txt").write_text("x")
    assert "more than 3 files" in refused(source, "harness", max_files=3)


@pytest.mark.parametrize("config_name", ["config.json", "tokenizer_config.json"])
@pytest.mark.parametrize("key", ["auto_map", "trust_remote_code"])
def test_config_needing_remote_code_is_refused(tmp_path: Path, config_name: str, key: str) -> None:
    source = make_model(tmp_path / "m")
    value = {"AutoModel": "modeling_evil.EvilModel"} if key == "auto_map" else True
    (source / config_name).write_text(json.dumps({"model_type": "gpt2", key: value}))
    assert f"{config_name}: '{key}' asks for remote code" in refused(source)


def test_python_file_in_a_model_is_refused(tmp_path: Path) -> None:
    source = make_model(tmp_path / "m")
    (source / "modeling_evil.py").write_text("import os\n")
    assert "modeling_evil.py: not a safetensors, JSON or tokenizer file" in refused(source)


def test_model_without_config_is_refused(tmp_path: Path) -> None:
    source = make_model(tmp_path / "m")
    (source / "config.json").unlink()
    assert "config.json: missing" in refused(source)


def test_model_without_safetensors_weights_is_refused(tmp_path: Path) -> None:
    source = make_model(tmp_path / "m")
    (source / "model.safetensors").unlink()
    assert "no *.safetensors weights" in refused(source)


def test_malformed_safetensors_is_refused(tmp_path: Path) -> None:
    source = make_model(tmp_path / "m")
    (source / "model.safetensors").write_bytes(struct.pack("<Q", 10**6) + b"{}")
    assert "model.safetensors: corrupt safetensors file" in refused(source)


def test_safetensors_whose_header_length_looks_like_a_pickle_opcode_is_accepted(
    tmp_path: Path,
) -> None:
    source = make_model(tmp_path / "m")
    header = json.dumps({"__metadata__": {"pad": ""}}).encode()
    header += b" " * (896 - len(header))  # 896 = 0x380: first bytes 80 03, like pickle v3
    (source / "model.safetensors").write_bytes(struct.pack("<Q", 896) + header)
    assert "model.safetensors" in intake(source, "model").files


def test_non_utf8_file_name_is_refused(tmp_path: Path) -> None:
    source = make_harness(tmp_path / "h")
    with open(os.path.join(os.fsencode(source), b"bad\xff.txt"), "wb") as handle:
        handle.write(b"x")
    assert "file name is not valid UTF-8" in refused(source, "harness")


def test_path_with_a_nul_byte_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CandidateRefused, match="not a valid path"):
        intake_from(tmp_path, "models/\x00", "model")


@pytest.mark.parametrize("relative", ["../outside", "/etc", "models/../../outside"])
def test_path_leaving_the_workspace_is_refused(tmp_path: Path, relative: str) -> None:
    workspace = tmp_path / "ws"
    make_model(workspace / "models" / "a")
    make_model(tmp_path / "outside")
    with pytest.raises(CandidateRefused, match="path leaves the workspace"):
        intake_from(workspace, relative, "model")


def test_symlinked_path_component_in_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "models").mkdir(parents=True)
    make_model(tmp_path / "elsewhere")
    (workspace / "models" / "a").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(CandidateRefused, match="models/a: a: is a symbolic link"):
        intake_from(workspace, "models/a", "model")


def test_file_swapped_for_a_symlink_after_the_scan_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_store: Path
) -> None:
    source = make_model(tmp_path / "m")
    real_scan = intake_module._scan

    def scan_then_swap(*args):  # type: ignore[no-untyped-def]
        files = real_scan(*args)
        (source / "tokenizer.json").unlink()
        (source / "tokenizer.json").symlink_to(private_store / "secret")
        return files

    monkeypatch.setattr(intake_module, "_scan", scan_then_swap)
    assert "tokenizer.json: cannot be opened safely" in refused(source)


def test_file_replaced_by_another_after_the_scan_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = make_model(tmp_path / "m")
    real_scan = intake_module._scan

    def scan_then_replace(*args):  # type: ignore[no-untyped-def]
        files = real_scan(*args)
        (tmp_path / "other.json").write_text('{"x": 1}')
        os.replace(tmp_path / "other.json", source / "tokenizer.json")
        return files

    monkeypatch.setattr(intake_module, "_scan", scan_then_replace)
    assert "tokenizer.json: changed while it was being read" in refused(source)


def test_shard_index_naming_a_file_outside_the_model_is_refused(tmp_path: Path) -> None:
    source = make_model(tmp_path / "m")
    index = {"weight_map": {"w": "../../secret.safetensors"}}
    (source / "model.safetensors.index.json").write_text(json.dumps(index))
    assert "model.safetensors.index.json: shard '../../secret.safetensors'" in refused(source)
