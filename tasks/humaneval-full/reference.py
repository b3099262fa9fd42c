"""humaneval-full reference solution: humaneval's data and harness changes, and a trainer
change for a LoRA on an 8B base.

Data and harness: humaneval's reference (``../humaneval/reference.py``): the self-contained
standard-library functions as training rows, and the harness that keeps the best of a greedy
and 32 sampled bodies by the docstring's own examples.
Trainer: completion-only loss and a cosine schedule after 10 warm-up steps, as in humaneval,
but at 1e-4: humaneval's 3e-5 is a full fine-tune's rate, and a LoRA adapter starts at zero
and needs a larger one. Not yet measured at this scale.
"""

import tomllib
from pathlib import Path

import tomli_w

from vtbench.tasks.registry import import_file

HUMANEVAL = import_file(Path(__file__).resolve().parent.parent / "humaneval" / "reference.py",
                        "humaneval_full_humaneval_reference")
TRAINER = {"lr": 1e-4, "schedule": "cosine", "warmup_steps": 10, "completion_only_loss": True}

apply_data = HUMANEVAL.apply_data
apply_harness = HUMANEVAL.apply_harness


def apply_trainer(trainer_dir: Path, task) -> None:
    config_path = trainer_dir / "config.toml"
    config = tomllib.loads(config_path.read_text())
    config.update(TRAINER)
    config_path.write_text(tomli_w.dumps(config))
