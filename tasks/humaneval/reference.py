"""humaneval reference solution: scripted changes to data, trainer and harness.

Data: drop stub bodies, private helpers and dunder methods, functions longer than the
trainer's context, rows that do not compile once tabs are expanded (the two-space junk),
and repeats; then top up with more clean standard-library functions mined the same way
(an agent can mine the same standard library inside its sandbox).
Trainer: completion-only loss, a smaller learning rate with warm-up and cosine decay.
Harness: each prompt sent without its final newline (SmolLM2's tokenizer never ends a line
on a lone newline token before indented code, so the untrained model starts a new top-level
line there); a greedy and 32 sampled bodies (temperature 0.8, at most 128 tokens),
keeping the one that passes most of the docstring's own examples (see
``reference_harness/run.py``). Measured on all 164 problems (one seed, H200, 2026-12-01):
the reference model's best of 32 samples by the examples solves 11 test problems, its best
of 4 samples 6.
"""

import ast
import random
import shutil
import tomllib
from pathlib import Path

import tomli_w

from vtbench.tasks.tiny_reference import improve_trainer, read_rows, write_rows

HERE = Path(__file__).parent
MAX_CHARACTERS = 1600
"""About 512 tokens of code: longer rows are cut by the trainer and teach run-on bodies."""
MAX_BODY_LINES = 40
TARGET_ROWS = 2500
SAMPLED_TOKENS = 128
"""Enough for most HumanEval bodies; longer samples are mostly a small model's loops."""
SAMPLES = 32
TEMPERATURE = 0.8
TRAINER = {"steps": 120, "lr": 3e-5, "schedule": "cosine", "warmup_steps": 10}


def clean_row(row: dict, builder) -> dict | None:
    prompt, completion = row.get("prompt", ""), row.get("completion", "")
    if not isinstance(prompt, str) or not isinstance(completion, str):
        return None
    completion = completion.expandtabs(4)
    function = builder.last_function(prompt)
    if function is None or function.name.startswith("_") or builder.is_stub(completion):
        return None
    if len(prompt) + len(completion) > MAX_CHARACTERS \
            or completion.count("\n") > MAX_BODY_LINES:
        return None
    try:
        ast.parse(prompt + completion)
    except SyntaxError:
        return None
    return {"prompt": prompt, "completion": completion}


def apply_data(data_dir: Path, task) -> None:
    cleaned: dict[str, dict] = {}
    for row in read_rows(data_dir):
        fixed = clean_row(row, task.builder)
        if fixed:
            cleaned.setdefault(fixed["prompt"], fixed)
    pool = list(task.builder.mined_pool())
    random.Random(5).shuffle(pool)
    for function in pool:
        if len(cleaned) >= TARGET_ROWS:
            break
        fixed = clean_row(function, task.builder)
        if fixed:
            cleaned.setdefault(fixed["prompt"], fixed)
    write_rows(data_dir, list(cleaned.values()))


def apply_trainer(trainer_dir: Path, task) -> None:
    improve_trainer(trainer_dir, **TRAINER)


def apply_harness(harness_dir: Path, task) -> None:
    shutil.copy(HERE / "reference_harness" / "run.py", harness_dir / "run.py")
    settings_path = harness_dir / "harness.toml"
    settings = tomllib.loads(settings_path.read_text())
    settings.update(samples=SAMPLES, seed=0, check_timeout=5.0,
                    sampling={"temperature": TEMPERATURE, "top_p": 0.95,
                              "max_tokens": SAMPLED_TOKENS})
    settings_path.write_text(tomli_w.dumps(settings))
