"""dsl reference solution: scripted changes to data, trainer and harness.

Data: read every row's program in the documented syntax (the rows written with commas or
in capitals rewritten), keep the rows whose program reproduces their examples with the
public interpreter, remove duplicates, and synthesise the three-step items the data lacks.
Trainer: every program of the data also shown on new words (two more rows per row, made
with the interpreter: ``reference_trainer/fresh_examples.py``), the loss kept on every token,
warm-up and cosine decay, 400 steps (the initial 300).
Harness: sample programs and keep one that reproduces the shown examples.
"""

import random
import shutil
import tomllib
from pathlib import Path

import tomli_w

from vtbench.tasks.tiny_reference import read_rows, set_trainer_config, write_rows

HERE = Path(__file__).parent


def documented_syntax(program: str) -> str:
    return program.strip().lower().replace(", ", " | ")


def fits(program: str, examples: list[list[str]], dsl) -> bool:
    return all(dsl.run(program, source) == target for source, target in examples)


def apply_data(data_dir: Path, task) -> None:
    builder = task.builder
    cleaned = {}
    for row in read_rows(data_dir):
        instance_input = builder.row_input(row)
        program = documented_syntax(row["completion"])
        if instance_input and fits(program, instance_input["examples"], builder.dsl):
            cleaned[row["prompt"]] = {"prompt": row["prompt"], "completion": f" {program}"}
    rng = random.Random(11)
    while len(cleaned) < 3000:
        item = builder.make_item(rng, two_op_share=0.8)
        prompt = builder.PROMPT.format(examples=builder.format_examples(item["examples"]))
        cleaned[prompt] = {"prompt": prompt, "completion": f" {item['program']}"}
    write_rows(data_dir, list(cleaned.values()))


READS_ROWS = "for row in load_rows(data)]"
READS_FRESH_ROWS = "for row in with_fresh_examples(load_rows(data), seed)]"
IMPORTS = "from transformers.utils import logging as hf_logging\n"


def apply_trainer(trainer_dir: Path, task) -> None:
    shutil.copy(HERE / "public" / "harness" / "dsl.py", trainer_dir / "dsl.py")
    shutil.copy(HERE / "reference_trainer" / "fresh_examples.py", trainer_dir)
    code = trainer_dir / "train.py"
    text = code.read_text()
    if text.count(READS_ROWS) != 1 or IMPORTS not in text:
        raise ValueError(f"{code}: not the initial trainer's way of reading its rows")
    text = text.replace(IMPORTS, IMPORTS + "\nfrom fresh_examples import with_fresh_examples\n")
    code.write_text(text.replace(READS_ROWS, READS_FRESH_ROWS))
    set_trainer_config(trainer_dir, steps=400, lr=1e-3, schedule="cosine", warmup_steps=20)


def apply_harness(harness_dir: Path, task) -> None:
    shutil.copy(HERE / "reference_harness" / "run.py", harness_dir / "run.py")
    settings_path = harness_dir / "harness.toml"
    settings = tomllib.loads(settings_path.read_text())
    settings.update(samples=8, seed=0,
                    sampling={"temperature": 0.8, "top_p": 1.0, "max_tokens": 40})
    settings_path.write_text(tomli_w.dumps(settings))
