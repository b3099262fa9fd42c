"""arith reference solution: scripted changes to data and trainer (the harness is fixed).

Data: drop rows whose format cannot be recovered, recompute every worked answer
("8+23=31. 31-9=22. Answer: 22") with a parser of the question, rewrite the junk formats,
remove duplicates and synthesise problems of the template the data under-represents.
Trainer: completion-only loss, warm-up and cosine decay, twice the steps.
"""

import random
import re
from pathlib import Path

from vtbench.tasks.tiny_reference import improve_trainer, read_rows, write_rows

PATTERNS = [
    (re.compile(r"has (\d+) .*buys (\d+) more and gives away (\d+)"), "+", "-"),
    (re.compile(r"holds (\d+) .*fills (\d+) boxes and adds (\d+)"), "*", "+"),
    (re.compile(r"had (\d+) .*lost (\d+), then found (\d+)"), "-", "+"),
]
OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}


def worked_answer(question: str) -> str | None:
    for pattern, first, second in PATTERNS:
        match = pattern.search(question)
        if match:
            a, b, c = map(int, match.groups())
            ab = OPS[first](a, b)
            total = OPS[second](ab, c)
            return f" {a}{first}{b}={ab}. {ab}{second}{c}={total}. Answer: {total}"
    return None


def clean_row(row: dict) -> dict | None:
    match = re.fullmatch(r"Question: (.+)\nAnswer:", row.get("prompt", ""), re.S)
    if not match:
        return None
    completion = worked_answer(match.group(1))
    return {"prompt": row["prompt"], "completion": completion} if completion else None


def apply_data(data_dir: Path, task) -> None:
    cleaned = {}
    for row in read_rows(data_dir):
        fixed = clean_row(row)
        if fixed:
            cleaned[fixed["prompt"]] = fixed
    rng = random.Random(7)
    while len(cleaned) < 2400:
        problem = task.builder.make_problem(rng, weights=(0.2, 0.6, 0.2))
        fixed = clean_row({"prompt": task.builder.PROMPT.format(question=problem["question"])})
        if fixed:
            cleaned[fixed["prompt"]] = fixed
    write_rows(data_dir, list(cleaned.values()))


def apply_trainer(trainer_dir: Path, task) -> None:
    improve_trainer(trainer_dir, steps=600, lr=1e-3, schedule="cosine", warmup_steps=20)


apply_harness = None
