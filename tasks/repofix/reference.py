"""repofix reference solution: scripted changes to data, trainer and harness.

Data: the trajectories made right (``reference_data/train.jsonl``, from ``make_data.py``):
every edit restores the function, every row is a distinct instance, none is cut by the
context. Trainer: completion-only loss (the transcript is the prompt, the action the
completion), a cosine schedule after 10 warm-up steps and rows of up to 2,048 tokens (the
initial 512 cut most transcripts before the action); a LoRA at 1e-4, a full fine-tune at
3e-5. Harness: ``reference_harness/`` (localise from the traceback, reproduce the failing
test, sample several edits and keep one that passes the reproduction and its test file,
observations cut short).
"""

import shutil
import tomllib
from pathlib import Path

import tomli_w

HERE = Path(__file__).resolve().parent
TRAINER = {"schedule": "cosine", "warmup_steps": 10, "completion_only_loss": True,
           "max_length": 2048, "steps": 300}


def apply_data(data_dir: Path, task) -> None:
    for old in data_dir.glob("*.jsonl"):
        old.unlink()
    shutil.copy(HERE / "reference_data" / "train.jsonl", data_dir / "train.jsonl")


def apply_trainer(trainer_dir: Path, task) -> None:
    path = trainer_dir / "config.toml"
    config = tomllib.loads(path.read_text())
    config.update(TRAINER)
    config["lr"] = 1e-4 if config.get("lora", {}).get("enabled") else 3e-5
    path.write_text(tomli_w.dumps(config))


def apply_harness(harness_dir: Path, task) -> None:
    for source in sorted((HERE / "reference_harness").iterdir()):
        if source.is_file() and source.suffix in {".py", ".toml"}:
            shutil.copy(source, harness_dir / source.name)
