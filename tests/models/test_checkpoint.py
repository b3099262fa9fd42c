"""load_checkpoint refuses every unsafe or broken checkpoint with one line naming the file."""

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.models.conftest import memory_bomb
from vtbench.errors import CheckpointError
from vtbench.models.checkpoint import check_checkpoint, load_checkpoint, load_tokenizer
from vtbench.models.tiny import new_tiny_model, save_checkpoint


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "model"
    save_checkpoint(new_tiny_model(0), out)
    return out


@pytest.fixture
def checkpoint(saved: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "candidate"
    shutil.copytree(saved, copy)
    return copy


def refusal(directory: Path) -> str:
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(directory)
    line = caught.value.one_line()
    assert "\n" not in line
    return line


def test_a_saved_tiny_model_loads_in_float32_in_eval_mode(checkpoint: Path) -> None:
    import torch

    model = load_checkpoint(checkpoint)
    assert model.dtype == torch.float32
    assert not model.training
    reference = new_tiny_model(0)
    assert torch.equal(model.model.embed_tokens.weight, reference.model.embed_tokens.weight)
    assert load_tokenizer(checkpoint).padding_side == "left"


def test_a_small_checkpoint_loads_without_loader_threads_and_leaves_the_setting_as_it_was(
        checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from vtbench.models.checkpoint import ASYNC_LOAD_OFF

    monkeypatch.delenv(ASYNC_LOAD_OFF, raising=False)
    before = threading.active_count()
    started: list[str] = []
    original = threading.Thread.start

    def recorded(thread: threading.Thread) -> None:
        started.append(thread.name)
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", recorded)
    load_checkpoint(checkpoint)
    assert started == [] and threading.active_count() == before
    assert ASYNC_LOAD_OFF not in os.environ
    monkeypatch.setenv(ASYNC_LOAD_OFF, "0")
    load_checkpoint(checkpoint)
    assert os.environ[ASYNC_LOAD_OFF] == "0"


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    assert "missing" in refusal(tmp_path / "nowhere")


def test_a_directory_without_config_is_refused(checkpoint: Path) -> None:
    (checkpoint / "config.json").unlink()
    assert "config.json" in refusal(checkpoint)


def test_a_directory_without_safetensors_is_refused(checkpoint: Path) -> None:
    (checkpoint / "model.safetensors").unlink()
    assert "safetensors" in refusal(checkpoint)


@pytest.mark.parametrize("name", ["pytorch_model.bin", "weights.pt", "extra.pth", "state.pkl",
                                  "last.ckpt"])
def test_a_pickle_file_is_refused_even_beside_safetensors(checkpoint: Path, name: str) -> None:
    (checkpoint / name).write_bytes(b"\x80\x04K\x01.")
    assert name in refusal(checkpoint)


def test_a_pickle_file_in_a_subfolder_is_refused(checkpoint: Path) -> None:
    (checkpoint / "sub").mkdir()
    (checkpoint / "sub" / "optimizer.pt").write_bytes(b"\x80\x04K\x01.")
    assert "optimizer.pt" in refusal(checkpoint)


def test_a_symlink_inside_the_directory_is_refused(checkpoint: Path) -> None:
    os.symlink(checkpoint / "config.json", checkpoint / "alias.json")
    assert "alias.json" in refusal(checkpoint)


def test_a_symlink_leaving_the_directory_is_refused(checkpoint: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.safetensors"
    shutil.move(checkpoint / "model.safetensors", outside)
    os.symlink(outside, checkpoint / "model.safetensors")
    assert "model.safetensors" in refusal(checkpoint)


def test_an_index_naming_a_shard_outside_the_directory_is_refused(checkpoint: Path) -> None:
    index = {"metadata": {}, "weight_map": {"lm_head.weight": "../other/model.safetensors"}}
    (checkpoint / "model.safetensors.index.json").write_text(json.dumps(index))
    assert "model.safetensors.index.json" in refusal(checkpoint)


@pytest.mark.parametrize("config_file", ["config.json", "tokenizer_config.json"])
def test_remote_code_in_a_config_is_refused(checkpoint: Path, config_file: str) -> None:
    path = checkpoint / config_file
    config = json.loads(path.read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilModel"}
    path.write_text(json.dumps(config))
    (checkpoint / "modeling_evil.py").write_text("raise SystemExit('executed')\n")
    line = refusal(checkpoint)
    assert config_file in line
    assert "auto_map" in line


def test_a_truncated_safetensors_file_is_one_line_naming_it(checkpoint: Path) -> None:
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    line = refusal(checkpoint)
    assert "model.safetensors" in line
    assert "corrupt" in line


def test_a_safetensors_file_of_garbage_is_one_line_naming_it(checkpoint: Path) -> None:
    (checkpoint / "model.safetensors").write_bytes(os.urandom(4096))
    assert "model.safetensors" in refusal(checkpoint)


def test_invalid_json_in_config_is_one_line_naming_it(checkpoint: Path) -> None:
    (checkpoint / "config.json").write_text("{not json")
    assert "config.json" in refusal(checkpoint)


def test_a_config_that_does_not_fit_the_weights_is_one_line(checkpoint: Path) -> None:
    path = checkpoint / "config.json"
    config = json.loads(path.read_text())
    config["hidden_size"] = 96
    path.write_text(json.dumps(config))
    assert "the weights do not cover the config" in refusal(checkpoint)


def test_an_unknown_model_type_is_one_line(checkpoint: Path) -> None:
    path = checkpoint / "config.json"
    config = json.loads(path.read_text())
    config["model_type"] = "evil-remote-arch"
    path.write_text(json.dumps(config))
    assert "cannot load model" in refusal(checkpoint)


def test_check_checkpoint_returns_the_resolved_directory(checkpoint: Path) -> None:
    assert check_checkpoint(checkpoint) == checkpoint.resolve()


def test_weights_that_leave_out_what_the_config_asks_for_are_refused_before_allocation(
        saved: Path, tmp_path: Path) -> None:
    import resource

    bomb = memory_bomb(saved, tmp_path / "bomb")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    line = refusal(bomb)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert "config.json: the weights do not cover the config" in line
    assert "12 of its 38 parameters" in line and "mlp.gate_proj.weight [150000, 192]" in line
    assert grown_mb < 200


def test_a_tensor_of_another_shape_than_the_config_says_is_refused(checkpoint: Path) -> None:
    config = json.loads((checkpoint / "config.json").read_text())
    config["vocab_size"] += 1
    (checkpoint / "config.json").write_text(json.dumps(config))
    assert "model.embed_tokens.weight [102, 192]" in refusal(checkpoint)


def test_a_config_asking_for_more_layers_than_the_weights_hold_tensors_is_refused(
        checkpoint: Path) -> None:
    config = json.loads((checkpoint / "config.json").read_text())
    config["num_hidden_layers"] = 1_000_000
    (checkpoint / "config.json").write_text(json.dumps(config))
    assert "asks for 1000000 layers, the weights hold 38 tensors" in refusal(checkpoint)
