"""The model server's memory is capped by a cgroup of its own where the host gives one, so
a load beyond it is the candidate's failure on any device (the address-space cap holds on
the CPU only: CUDA reserves address ranges far beyond what it uses)."""

from pathlib import Path
from typing import Any

import pytest

from vtbench.errors import CheckpointError
from vtbench.models.serving import serve_model
from vtbench.models.tiny import new_tiny_model, save_checkpoint
from vtbench.sandbox import cgroup_limits, limit_groups

pytestmark = pytest.mark.skipif("memory" not in cgroup_limits().controllers,
                                reason="this host gives no per-process memory cgroup")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny model, and a wider one stored in bfloat16 (zero weights: built without the
    cost of initialising them): the CPU server loads it as float32, about 115 MB of fresh
    memory for 57 MB of files."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("memory")
    tiny = new_tiny_model(3)
    save_checkpoint(tiny, root / "tiny")
    config = LlamaConfig(**{**tiny.config.to_dict(), "hidden_size": 576,
                            "intermediate_size": 4096, "num_hidden_layers": 4})
    with torch.device("meta"):
        wide = LlamaForCausalLM(config)
    wide = wide.to_empty(device="cpu").to(torch.bfloat16)
    with torch.no_grad():
        for parameter in wide.parameters():
            parameter.zero_()
    save_checkpoint(wide, root / "wide")
    return root / "tiny", root / "wide"


def test_a_load_beyond_the_cgroup_memory_limit_is_the_candidates_failure(
        checkpoints: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    tiny, wide = checkpoints
    made: list[Path] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        groups = limit_groups(*args, **kwargs)
        made.extend(groups.dirs.values())
        return groups

    monkeypatch.setattr("vtbench.sandbox.limit_groups", recorded)
    with serve_model(tiny, device="cpu", memory_mb=64) as honest, honest.client() as http:
        assert http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).is_success
    with (pytest.raises(CheckpointError, match="ran out of its 64 MiB memory limit"),
          serve_model(wide, device="cpu", memory_mb=64)):
        pass
    assert made and all(group.name.startswith("vtbench-") for group in made)
    assert not [group for group in made if group.exists()]  # each server's goes with it


def test_the_default_memory_limit_leaves_room_for_an_honest_wide_checkpoint(
        checkpoints: tuple[Path, Path]) -> None:
    with serve_model(checkpoints[1], device="cpu") as server, server.client() as http:
        assert http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).is_success
