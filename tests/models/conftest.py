"""Checkpoints built to attack the model loader."""

import json
import shutil
from pathlib import Path


def memory_bomb(source: Path, target: Path, intermediate_size: int = 150_000) -> Path:
    """A copy of the checkpoint ``source`` whose config asks for a huge MLP while its
    weights leave the MLP out: a few MB on disk that transformers would fill with
    ``layers × 3 × hidden × intermediate_size`` freshly initialised floats."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target)
    weights = target / "model.safetensors"
    kept = {name: tensor for name, tensor in load_file(weights).items() if ".mlp." not in name}
    save_file(kept, weights, metadata={"format": "pt"})
    config = json.loads((target / "config.json").read_text())
    config["intermediate_size"] = intermediate_size
    (target / "config.json").write_text(json.dumps(config))
    return target
