"""Reference-solution steps shared by the tiny tasks (trusted task-author code).

The reference trainer change is what an agent could do to ``trainer/``: an algorithm change
(loss on the completion only, by rewriting ``loss_mask``) plus better hyperparameters.
"""

import json
import tomllib
from pathlib import Path

import tomli_w

INITIAL_LOSS_MASK = "    return [1] * length\n"
COMPLETION_ONLY_LOSS_MASK = "    return [0] * prompt_length + [1] * (length - prompt_length)\n"


def improve_trainer(trainer_dir: Path, **hyperparameters: object) -> None:
    """Train on completion tokens only and apply ``hyperparameters`` to config.toml."""
    code = trainer_dir / "train.py"
    text = code.read_text()
    if INITIAL_LOSS_MASK not in text:
        raise ValueError(f"{code}: loss_mask is not the initial one")
    code.write_text(text.replace(INITIAL_LOSS_MASK, COMPLETION_ONLY_LOSS_MASK))
    set_trainer_config(trainer_dir, **hyperparameters)


def set_trainer_config(trainer_dir: Path, **hyperparameters: object) -> None:
    """Apply ``hyperparameters`` to the trainer's config.toml."""
    config_path = trainer_dir / "config.toml"
    config = tomllib.loads(config_path.read_text())
    config.update(hyperparameters)
    config_path.write_text(tomli_w.dumps(config))


def read_rows(data_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(data_dir.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def write_rows(data_dir: Path, rows: list[dict]) -> None:
    """Replace all jsonl files of ``data_dir`` with one ``train.jsonl``."""
    for path in data_dir.glob("*.jsonl"):
        path.unlink()
    lines = (json.dumps(row) + "\n" for row in rows)
    (data_dir / "train.jsonl").write_text("".join(lines))
