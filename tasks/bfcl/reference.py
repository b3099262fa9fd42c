"""bfcl reference solution: scripted changes to data, trainer and harness.

Data: the committed ``reference_data/train.jsonl`` (``make_data.reference_rows``, mined
in the environment of ``reference_data/mined_from.txt``), in place of the initial rows:
the functions as JSON-schema documents like BFCL's, in the harness's prompt (the initial
and the reference harness share it), with distracting documents, parallel calls of one
function, calls of two functions, and multi-step rows whose second call uses the executed
result of the first; every argument of the declared type and no chat junk.
Trainer: completion-only loss, a smaller learning rate with warm-up and cosine decay, and
rows long enough for the documents (1,280 tokens: the reference rows reach 1,083), for
100 steps of 16 rows (as many rows as the initial 200 steps of 8: 300 steps overfit the
rows, loss 0.001, and scored val 0.100 against 0.14 at 100). Harness:
``reference_harness/`` (see its run.py): the initial harness's prompt, calls parsed and
repaired against the documents, a vote over a greedy and 8 sampled replies, and the
multi-turn loop run against the task's backends.
"""

import shutil
import tomllib
from pathlib import Path

import tomli_w

from vtbench.tasks.tiny_reference import read_rows, write_rows

HERE = Path(__file__).parent
TRAINER = {"steps": 100, "batch_size": 16, "lr": 1e-4, "schedule": "cosine",
           "warmup_steps": 20, "max_length": 1280, "completion_only_loss": True}
HARNESS = {"samples": 8, "seed": 0, "max_steps": 5, "context_tokens": 8192,
           "decoding": {"temperature": 0.0, "max_tokens": 192},
           "sampling": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 192}}


def apply_data(data_dir: Path, task) -> None:
    write_rows(data_dir, read_rows(HERE / "reference_data"))


def apply_trainer(trainer_dir: Path, task) -> None:
    config_path = trainer_dir / "config.toml"
    config = tomllib.loads(config_path.read_text())
    config.update(TRAINER)
    config_path.write_text(tomli_w.dumps(config))


def apply_harness(harness_dir: Path, task) -> None:
    for name in ("run.py", "prompting.py"):
        shutil.copy(HERE / "reference_harness" / name, harness_dir / name)
    settings_path = harness_dir / "harness.toml"
    settings = tomllib.loads(settings_path.read_text())
    settings.update(HARNESS)
    settings_path.write_text(tomli_w.dumps(settings))
