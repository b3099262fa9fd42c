"""extract reference solution: scripted changes to data and trainer (the harness is fixed).

Data: read the sentence back out of every row (either prompt format), relabel it with a
parser of the sentence patterns (which undoes the swapped city and job), rewrite the row
in the harness's format with a JSON completion, remove duplicates, and synthesise
sentences of the patterns the data lacks until each has :data:`LEAST_PER_PATTERN` rows.
(Topping all patterns up to 2,400 rows made an earlier 300-step reference worse, 0.17
against 0.49 on val: the tiny model then saw each row twice, not three times; so only the
missing patterns are added.)
Trainer: completion-only loss, warm-up and cosine decay, twice the steps.
"""

import json
import random
import re
from collections import Counter
from pathlib import Path

from vtbench.tasks.tiny_reference import improve_trainer, read_rows, write_rows

NAME, AGE = r"(?P<name>[A-Z][a-z]+ [A-Z][a-z]+)", r"(?P<age>\d+)"
CITY, JOB, A = r"(?P<city>[A-Z][a-z]+)", r"(?P<job>[a-z]+)", r"an? "
PATTERNS = [re.compile(pattern) for pattern in (
    rf"{NAME} is a {AGE}-year-old {JOB} from {CITY}\.",
    rf"{NAME}, {AGE}, works as {A}{JOB} in {CITY}\.",
    rf"{CITY} is home to {NAME}, {A}{JOB} aged {AGE}\.",
    rf"{NAME} works as {A}{JOB} in {CITY}\.",
    rf"{NAME} is {A}{JOB} and is {AGE} years old\.",
    rf"{NAME} lives in {CITY} and turned {AGE} last May\.",
    rf"Our new {JOB} is {NAME}\.",
    rf"{NAME} just moved to {CITY}\.",
    rf"At {AGE}, {NAME} became {A}{JOB}\.",
)]
FIELDS = ("name", "age", "city", "job")
PROMPT = "Text: {text}\nJSON:"


LEAST_PER_PATTERN = 150


def pattern_of(text: str) -> int | None:
    """Which of :data:`PATTERNS` a sentence follows, or None."""
    return next((i for i, pattern in enumerate(PATTERNS) if pattern.fullmatch(text)), None)


def parse_sentence(text: str) -> dict | None:
    """The fields a sentence states, in a fixed order, or None for an unknown pattern."""
    index = pattern_of(text)
    if index is None:
        return None
    found = PATTERNS[index].fullmatch(text).groupdict()  # type: ignore[union-attr]
    label: dict[str, object] = {f: found[f] for f in FIELDS if f in found}
    if "age" in label:
        label["age"] = int(found["age"])
    return label


def clean_row(row: dict) -> dict | None:
    match = re.fullmatch(r"(?:Text|Sentence): (.+)\n(?:JSON|Output):", row.get("prompt", ""))
    label = parse_sentence(match.group(1)) if match else None
    if match is None or label is None:
        return None
    return {"prompt": PROMPT.format(text=match.group(1)), "completion": " " + json.dumps(label)}


def apply_data(data_dir: Path, task) -> None:
    cleaned = {}
    for row in read_rows(data_dir):
        fixed = clean_row(row)
        if fixed:
            cleaned[fixed["prompt"]] = fixed
    per_pattern = Counter(pattern_of(row["prompt"][len("Text: "):-len("\nJSON:")])
                          for row in cleaned.values())
    rng = random.Random(7)
    while min(per_pattern[i] for i in range(len(PATTERNS))) < LEAST_PER_PATTERN:
        text = task.builder.make_person(rng)["text"]
        index = pattern_of(text)
        fixed = clean_row({"prompt": PROMPT.format(text=text)})
        if index is not None and fixed and per_pattern[index] < LEAST_PER_PATTERN \
                and fixed["prompt"] not in cleaned:
            cleaned[fixed["prompt"]] = fixed
            per_pattern[index] += 1
    write_rows(data_dir, list(cleaned.values()))


def apply_trainer(trainer_dir: Path, task) -> None:
    improve_trainer(trainer_dir, steps=600, lr=1e-3, schedule="cosine", warmup_steps=20)


apply_harness = None
