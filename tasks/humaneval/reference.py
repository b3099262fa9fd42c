"""humaneval reference solution: scripted changes to data, trainer and harness.

Data: replaced by the self-contained functions of the standard library and of the installed
packages (public top-level functions with a docstring, a body of at most 25 lines, no
decorator, reading no name but their own and the builtins; see
``builder.self_contained_pool``): like a HumanEval problem, each can be written from its
signature and docstring alone, where most of the initial rows are methods and helpers that
lean on their module. An agent can mine the same: its sandbox mounts the same packages.
The rows are the committed ``reference_data/train.jsonl`` (``builder.reference_rows`` in
the environment of ``reference_data/mined_from.txt``), so every host prepares the same
reference. Measured on one H200 (2026-12-01, seed 0, 120 steps, the reference trainer
and harness, with the rows that host's larger image gave; trained by the tiny-task trainer,
before this task moved to the trl trainer): test 15 of 124 against 10 on the initial data
and 11 on cleaned standard-library rows.
Trainer: completion-only loss, half the initial learning rate (1e-4) with warm-up and cosine
decay, as settings of the trl trainer's ``config.toml``. At 3e-5 the trainings barely moved
the base model, so the data did not count (bench/RESULTS.md, 2026-12-06); at 1e-4 the
model learns the rows, and the initial data's misaligned bodies cost the reference 2.3
val problems.
Harness: each prompt sent without its final newline (SmolLM2's tokenizer never ends a line
on a lone newline token before indented code, so the untrained model starts a new top-level
line there); a greedy and 32 sampled bodies (temperature 0.8, at most 128 tokens),
keeping the one that passes most of the docstring's own examples (see
``reference_harness/run.py``). Measured on all 164 problems (one seed, H200, 2026-12-01):
the reference model's best of 32 samples by the examples solves 11 test problems, its best
of 4 samples 6.
"""

import shutil
import tomllib
from pathlib import Path

import tomli_w

from vtbench.tasks.tiny_reference import read_rows, write_rows

HERE = Path(__file__).parent
SAMPLED_TOKENS = 128
"""Enough for most HumanEval bodies; longer samples are mostly a small model's loops."""
SAMPLES = 32
TEMPERATURE = 0.8
TRAINER = {"steps": 120, "lr": 1e-4, "schedule": "cosine", "warmup_steps": 10,
           "completion_only_loss": True}


def apply_data(data_dir: Path, task) -> None:
    write_rows(data_dir, read_rows(task.builder.REFERENCE_DATA))


def apply_trainer(trainer_dir: Path, task) -> None:
    config_path = trainer_dir / "config.toml"
    config = tomllib.loads(config_path.read_text())
    config.update(TRAINER)
    config_path.write_text(tomli_w.dumps(config))


def apply_harness(harness_dir: Path, task) -> None:
    shutil.copy(HERE / "reference_harness" / "run.py", harness_dir / "run.py")
    settings_path = harness_dir / "harness.toml"
    settings = tomllib.loads(settings_path.read_text())
    settings.update(samples=SAMPLES, seed=0, check_timeout=5.0,
                    sampling={"temperature": TEMPERATURE, "top_p": 0.95,
                              "max_tokens": SAMPLED_TOKENS})
    settings_path.write_text(tomli_w.dumps(settings))
