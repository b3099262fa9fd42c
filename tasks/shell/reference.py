"""shell reference solution: scripted changes to data, trainer and harness.

Data: the initial rows replaced by clean ones from the task's own generator
(``builder.clean_rows``): every operation family in equal measure, the training phrasings
only, no prose, no repeats, no wrong flags; an agent can write the same generator (the
families are what the initial data shows, minus its flaws). Trainer: completion-only loss
(the prompt is most of each row's tokens), a smaller learning rate with warm-up and cosine
decay, more steps. Harness: ``reference_harness/run.py``: a greedy and sampled replies,
each command tried on its own scratch copy of the file system, failures and no-ops
rejected, a vote by outcome, within a CPU share per instance.
"""

import shutil
import tomllib
from pathlib import Path

import tomli_w

from vtbench.tasks.tiny_reference import write_rows

HERE = Path(__file__).parent
ROWS = 2400
TRAINER = {"steps": 200, "batch_size": 16, "lr": 1e-4, "schedule": "cosine",
           "warmup_steps": 10, "completion_only_loss": True}
HARNESS = {"samples": 8, "seed": 0, "command_timeout": 2.0, "cpu_per_instance": 1.5,
           "sampling": {"temperature": 0.8, "top_p": 0.95, "max_tokens": 64}}


def apply_data(data_dir: Path, task) -> None:
    write_rows(data_dir, task.builder.clean_rows(seed=7, size=ROWS, verify=False,
                                                       unique=True))


def apply_trainer(trainer_dir: Path, task) -> None:
    config_path = trainer_dir / "config.toml"
    config = tomllib.loads(config_path.read_text())
    config.update(TRAINER)
    config_path.write_text(tomli_w.dumps(config))


def apply_harness(harness_dir: Path, task) -> None:
    shutil.copy(HERE / "reference_harness" / "run.py", harness_dir / "run.py")
    settings_path = harness_dir / "harness.toml"
    settings = tomllib.loads(settings_path.read_text())
    settings.update(HARNESS)
    settings_path.write_text(tomli_w.dumps(settings))
