"""extract: fields of a person from one English sentence, as JSON (trusted task code; never
shown to the agent).

Each sentence comes from one of several templates and names a person plus some of their
age, city and job; the label holds exactly the fields the sentence states. ``build_split``
draws sentences from a secret-seeded generator and leaves out any whose normalised text
appears in the public training data. ``public_rows`` makes the initial training data,
realistically flawed: wrong, missing and invented fields, duplicates, format junk, a
template mix that differs from the evaluation splits (four of the nine templates never
occur), and one systematic error that no check of a value against its sentence sees: in
every row whose sentence names both a city and a job the labeller swapped the two fields
(``"city": "florist", "job": "Ghent"``). Filtering keeps or loses those rows; only
relabelling them (and new sentences of the missing templates) teaches the task. Noise
rates are arguments, so calibration can tune them.
"""

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

# Vocabularies deliberately differ from the pre-training corpus (vtbench/models/corpus.py).
FIRST_NAMES = ["Alma", "Bruno", "Carla", "Dario", "Elena", "Felix", "Greta", "Hanna", "Igor",
               "Jonas", "Karin", "Lars", "Marta", "Nils", "Olga", "Pavel", "Rita", "Sven",
               "Tomas", "Vera"]
LAST_NAMES = ["Adler", "Brandt", "Castro", "Dimitrov", "Eriksen", "Fischer", "Garcia",
              "Hansen", "Jensen", "Keller", "Lindqvist", "Meyer", "Nowak", "Petrov", "Rossi",
              "Schmidt", "Varga", "Wolff"]
CITIES = ["Vienna", "Munich", "Krakow", "Dublin", "Lyon", "Seville", "Geneva", "Tallinn",
          "Zagreb", "Bilbao", "Utrecht", "Gdansk", "Ghent", "Basel", "Riga", "Salzburg",
          "Aarhus", "Bologna"]
JOBS = ["architect", "cashier", "florist", "mechanic", "librarian", "surgeon", "tailor",
        "carpenter", "journalist", "pharmacist", "electrician", "gardener", "optician",
        "translator", "accountant", "engineer"]
FIELDS = ("name", "age", "city", "job")
AGES = (19, 79)
PROMPT = "Text: {text}\nJSON:"


def _a(job: str) -> str:
    return ("an " if job[0] in "aeiou" else "a ") + job


@dataclass(frozen=True)
class Template:
    """A sentence pattern and the fields it states (``job_a`` is the job with its article)."""

    pattern: str

    @property
    def fields(self) -> tuple[str, ...]:
        used = set(re.findall(r"\{(\w+)\}", self.pattern))
        return tuple(f for f in FIELDS if f in used or (f == "job" and "job_a" in used))


TEMPLATES = [
    Template("{name} is a {age}-year-old {job} from {city}."),
    Template("{name}, {age}, works as {job_a} in {city}."),
    Template("{city} is home to {name}, {job_a} aged {age}."),
    Template("{name} works as {job_a} in {city}."),
    Template("{name} is {job_a} and is {age} years old."),
    Template("{name} lives in {city} and turned {age} last May."),
    Template("Our new {job} is {name}."),
    Template("{name} just moved to {city}."),
    Template("At {age}, {name} became {job_a}."),
]
SPLIT_WEIGHTS = (1.0,) * len(TEMPLATES)
# The public data over-represents the first two templates and never has the last four.
PUBLIC_WEIGHTS = (0.40, 0.30, 0.04, 0.16, 0.10, 0.0, 0.0, 0.0, 0.0)


def make_person(rng: random.Random, weights: tuple[float, ...] = SPLIT_WEIGHTS) -> dict:
    """One sentence and its label: ``{"text": ..., "label": {field: value}}``."""
    template = rng.choices(TEMPLATES, weights)[0]
    job = rng.choice(JOBS)
    values = {"name": f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
              "age": rng.randint(*AGES), "city": rng.choice(CITIES), "job": job}
    text = template.pattern.format(job_a=_a(job), **values)
    return {"text": text, "label": {f: values[f] for f in template.fields}}


def _one_of(words: list[str]) -> str:
    return "(?:" + "|".join(words) + ")"


GROUPS = {
    "name": rf"(?P<name>{_one_of(FIRST_NAMES)} {_one_of(LAST_NAMES)})",
    "age": r"(?P<age>\d+)",
    "city": rf"(?P<city>{_one_of(CITIES)})",
    "job": rf"(?P<job>{_one_of(JOBS)})",
    "job_a": rf"an? (?P<job>{_one_of(JOBS)})",
}


@cache
def _template_regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", pattern)
    return re.compile("".join(GROUPS[p] if i % 2 else re.escape(p) for i, p in enumerate(parts)))


def true_label(text: str) -> dict | None:
    """The label of a generated sentence, read back through its template (None if none fits)."""
    for template in TEMPLATES:
        match = _template_regex(template.pattern).fullmatch(text)
        if match:
            found = match.groupdict()
            return {f: int(found[f]) if f == "age" else found[f] for f in template.fields}
    return None


def normalize(instance_input: dict) -> str:
    return re.sub(r"[^a-z0-9]+", " ", instance_input["text"].lower()).strip()


def build_split(rng: random.Random, size: int, exclude: set[str]) -> list[dict]:
    items: list[dict] = []
    while len(items) < size:
        person = make_person(rng)
        instance_input = {"text": person["text"]}
        key = normalize(instance_input)
        if key in exclude:
            continue
        exclude.add(key)
        items.append({"input": instance_input, "label": person["label"]})
    return items


def _wrong_age(rng: random.Random, label: dict) -> bool:
    if "age" not in label:
        return False
    label["age"] += rng.choice([-7, -2, -1, 1, 3, 10])
    return True


def _wrong_word(rng: random.Random, label: dict) -> bool:
    field = rng.choice([f for f in ("city", "job") if f in label] or ["name"])
    if field == "name":
        label["name"] = f"{rng.choice(FIRST_NAMES)} {label['name'].split()[1]}"
        return True
    label[field] = rng.choice([v for v in (CITIES if field == "city" else JOBS)
                               if v != label[field]])
    return True


def _dropped_field(rng: random.Random, label: dict) -> bool:
    if len(label) < 2:
        return False
    del label[rng.choice([f for f in label if f != "name"])]
    return True


def _invented_field(rng: random.Random, label: dict) -> bool:
    missing = [f for f in FIELDS if f not in label]
    if not missing:
        return False
    field = rng.choice(missing)
    label[field] = (rng.randint(*AGES) if field == "age"
                    else rng.choice(CITIES if field == "city" else JOBS))
    return True


def _first_name_only(rng: random.Random, label: dict) -> bool:
    label["name"] = label["name"].split()[0]
    return True


LABEL_FLAWS: list[Callable[[random.Random, dict], bool]] = [
    _wrong_age, _wrong_word, _dropped_field, _invented_field, _first_name_only]


def corrupt_label(rng: random.Random, label: dict) -> None:
    """Apply one label flaw that fits ``label`` (every label fits at least one)."""
    for flaw in rng.sample(LABEL_FLAWS, len(LABEL_FLAWS)):
        if flaw(rng, label):
            return


def swapped(label: dict) -> dict:
    """The label with city and job swapped where it has both (the labeller's systematic error)."""
    if "city" not in label or "job" not in label:
        return dict(label)
    return {**label, "city": label["job"], "job": label["city"]}


def _flawed_row(rng: random.Random, person: dict, label_noise: float, junk_rate: float) -> dict:
    label = swapped(person["label"])
    if rng.random() < label_noise:
        corrupt_label(rng, label)
    prompt, completion = PROMPT.format(text=person["text"]), " " + json.dumps(label)
    junk = rng.random() / junk_rate if junk_rate > 0 else 1.0
    if junk < 0.3:
        completion = " " + str(label)  # a Python dict: single quotes, not JSON
    elif junk < 0.55:
        prompt = f"Sentence: {person['text']}\nOutput:"
    elif junk < 0.8:
        completion = " " + json.dumps({k: str(v) for k, v in label.items()}) + " // ok"
    elif junk < 1.0:
        completion = " Result: " + json.dumps(label, indent=1).replace("\n", "")
    return {"prompt": prompt, "completion": completion}


def public_rows(seed: int = 20261130, size: int = 1400, label_noise: float = 0.2,
                junk_rate: float = 0.12, duplicate_share: float = 1 / 6) -> list[dict]:
    """The initial training data (deterministic)."""
    rng = random.Random(seed)
    rows = [_flawed_row(rng, make_person(rng, PUBLIC_WEIGHTS), label_noise, junk_rate)
            for _ in range(size)]
    rows += rng.sample(rows, int(size * duplicate_share))
    rng.shuffle(rows)
    return rows


def row_input(row: dict) -> dict | None:
    """The instance input a training row was made from (any of its prompt formats)."""
    match = re.match(r"(?:Text|Sentence): (.+)\n", row.get("prompt", ""), re.S)
    return {"text": match.group(1)} if match else None
