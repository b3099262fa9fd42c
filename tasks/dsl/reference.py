"""dsl reference solution: scripted changes to data, trainer and harness.

Data: recover the examples of every row, relabel it with the shortest program (from an
exhaustive search with the public interpreter) that reproduces them, drop rows none fits,
remove duplicates, and synthesise two-operation items the data lacks.
Trainer: completion-only loss, warm-up and cosine decay, 400 steps (the initial 300).
Harness: sample eight programs and keep one that reproduces the shown examples.
"""

import itertools
import random
import shutil
import tomllib
from pathlib import Path

import tomli_w

from vtbench.tasks.tiny_reference import improve_trainer, read_rows, write_rows

HERE = Path(__file__).parent


def all_programs(names: list[str]) -> list[str]:
    singles = list(names)
    pairs = [f"{a} | {b}" for a, b in itertools.product(names, repeat=2)]
    return singles + pairs


def relabel(examples: list[list[str]], programs: list[str], dsl) -> str | None:
    for program in programs:
        if all(dsl.run(program, source) == target for source, target in examples):
            return program
    return None


def apply_data(data_dir: Path, task) -> None:
    builder = task.builder
    programs = all_programs(builder.NAMES)
    cleaned = {}
    for row in read_rows(data_dir):
        instance_input = builder.row_input(row)
        program = instance_input and relabel(instance_input["examples"], programs, builder.dsl)
        if program:
            cleaned[row["prompt"]] = {"prompt": row["prompt"], "completion": f" {program}"}
    rng = random.Random(11)
    while len(cleaned) < 3000:
        item = builder.make_item(rng, two_op_share=0.8)
        program = relabel(item["examples"], programs, builder.dsl)
        prompt = builder.PROMPT.format(examples=builder.format_examples(item["examples"]))
        cleaned[prompt] = {"prompt": prompt, "completion": f" {program}"}
    write_rows(data_dir, list(cleaned.values()))


def apply_trainer(trainer_dir: Path, task) -> None:
    improve_trainer(trainer_dir, steps=400, lr=1e-3, schedule="cosine", warmup_steps=20)


def apply_harness(harness_dir: Path, task) -> None:
    shutil.copy(HERE / "reference_harness" / "run.py", harness_dir / "run.py")
    settings_path = harness_dir / "harness.toml"
    settings = tomllib.loads(settings_path.read_text())
    settings.update(samples=8, seed=0,
                    sampling={"temperature": 0.8, "top_p": 1.0, "max_tokens": 40})
    settings_path.write_text(tomli_w.dumps(settings))
