"""Where a task's base model comes from: ``tiny``, ``smol`` or a local checkpoint path.

``tiny`` is the released pre-trained checkpoint in the repository (``models/tiny-base``),
unless ``vtbench pretrain --install`` has put a rebuilt one in the private store.
"""

from pathlib import Path

from vtbench import layout
from vtbench.errors import CheckpointError, NotPrepared


def installed_tiny_base() -> Path:
    return layout.base_models() / "tiny"


def resolve_base(name: str) -> Path:
    if name == "tiny":
        for candidate in (installed_tiny_base(), layout.RELEASED_BASE):
            if (candidate / "model.safetensors").exists():
                return candidate
        raise NotPrepared("the tiny base model is missing", hint="run: vtbench pretrain --install")
    if name == "smol":
        from vtbench.models.smol import ensure_smol

        return ensure_smol()
    path = Path(name).expanduser()
    if not (path / "config.json").exists():
        raise CheckpointError(f"base model {name!r}: no config.json there",
                              hint="use tiny, smol or the path of a local HF checkpoint")
    return path
