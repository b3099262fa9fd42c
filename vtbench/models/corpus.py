"""Generic pre-training text: synthetic documents plus local English text.

The tiny base model learns to read and write digits, sentences, key=value records, JSON
and string transformations in general forms; no document is drawn from a task's
distribution, so pre-training cannot leak a split. Everything is a pure function of the
seed and of the Python standard library's own docstrings.
"""

import json
import pydoc
import random
import string
from collections.abc import Callable, Iterator

FIRST_NAMES = ["Ada", "Ben", "Cleo", "Dan", "Eva", "Finn", "Gia", "Hugo", "Ivy", "Jon", "Kim",
               "Leo", "Mia", "Noah", "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara", "Uma",
               "Vic", "Wes", "Xena", "Yara", "Zed"]
LAST_NAMES = ["Stone", "Reed", "Khan", "Silva", "Novak", "Moreau", "Berg", "Ito", "Lopez",
              "Park", "Okafor", "Weber", "Costa", "Nair", "Dahl", "Ruiz"]
CITIES = ["Oslo", "Lima", "Quito", "Porto", "Turin", "Leeds", "Delft", "Kyoto", "Cairo",
          "Perth", "Austin", "Bergen", "Malmo", "Graz", "Bonn", "Nice"]
JOBS = ["baker", "nurse", "pilot", "teacher", "farmer", "chemist", "painter", "lawyer",
        "plumber", "editor", "dentist", "welder"]
THINGS = ["apples", "books", "coins", "marbles", "pens", "stamps", "cards", "shells"]
STDLIB_MODULES = ["os", "re", "json", "random", "string", "textwrap", "collections",
                  "itertools", "functools", "pathlib", "shutil", "csv", "datetime", "math",
                  "statistics", "heapq", "bisect", "argparse", "logging", "unittest"]


def arithmetic_fact(rng: random.Random) -> str:
    a, b = rng.randint(0, 999), rng.randint(0, 999)
    form = rng.randrange(6)
    if form == 0:
        return f"{a} + {b} = {a + b}"
    if form == 1:
        return f"{max(a, b)} - {min(a, b)} = {max(a, b) - min(a, b)}"
    if form == 2:
        x, y = rng.randint(0, 30), rng.randint(0, 30)
        return f"{x} * {y} = {x * y}"
    if form == 3:
        return f"The sum of {a} and {b} is {a + b}."
    if form == 4:
        terms = [rng.randint(1, 60) for _ in range(rng.randint(3, 4))]
        return f"{' + '.join(map(str, terms))} = {sum(terms)}"
    return f"{a}+{b}={a + b}; {a + b}-{b}={a}"


def person_sentence(rng: random.Random) -> str:
    name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
    age, city, job = rng.randint(18, 90), rng.choice(CITIES), rng.choice(JOBS)
    return rng.choice([
        f"{name} is {age} years old and lives in {city}. They work as a {job}.",
        f"In {city}, the {job} {name} turned {age} this year.",
        f"name={name}; age={age}; city={city}; job={job}",
        f"{name} ({age}) - {job}, {city}",
    ])


def json_record(rng: random.Random) -> str:
    keys = rng.sample(["id", "name", "size", "color", "count", "city", "code", "tag"], 3)
    values: list[object] = [rng.randint(0, 500), rng.choice(CITIES), rng.choice(THINGS)]
    return json.dumps(dict(zip(keys, rng.sample(values, 3), strict=True)))


def string_operation(rng: random.Random) -> str:
    word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 8)))
    other = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 5)))
    form = rng.randrange(6)
    if form == 0:
        return f"reverse of {word} is {word[::-1]}"
    if form == 1:
        return f"{word} in capitals is {word.upper()}"
    if form == 2:
        return f"{word} and {other} joined: {word}{other}"
    if form == 3:
        return f"first letters of {word}: {word[:2]}; last letters: {word[-2:]}"
    if form == 4:
        return f"{word} has {len(word)} letters"
    return f"{word} {other} -> {other} {word}"


def counting(rng: random.Random) -> str:
    start, step = rng.randint(0, 50), rng.randint(1, 5)
    return " ".join(str(start + step * i) for i in range(rng.randint(4, 10)))


def story(rng: random.Random) -> str:
    name, thing = rng.choice(FIRST_NAMES), rng.choice(THINGS)
    have, more = rng.randint(2, 40), rng.randint(1, 20)
    return (f"{name} had {have} {thing} and found {more} more. "
            f"Now {name} has {have + more} {thing}.")


def local_text() -> list[str]:
    """Paragraphs of English from standard-library docstrings (ASCII only)."""
    paragraphs = []
    for name in STDLIB_MODULES:
        module = pydoc.locate(name)
        text = (getattr(module, "__doc__", None) or "").encode("ascii", "ignore").decode()
        paragraphs += [p.strip() for p in text.split("\n\n") if 40 < len(p.strip()) < 300]
    return paragraphs


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "arithmetic": arithmetic_fact,
    "people": person_sentence,
    "json": json_record,
    "strings": string_operation,
    "counting": counting,
    "stories": story,
}
MIX = {"arithmetic": 0.25, "people": 0.15, "json": 0.1, "strings": 0.2, "counting": 0.05,
       "stories": 0.15, "local_text": 0.1}


def documents(seed: int) -> Iterator[str]:
    """An endless, seed-determined stream of short documents drawn by :data:`MIX`."""
    rng = random.Random(seed)
    prose = local_text()
    names, weights = list(MIX), list(MIX.values())
    while True:
        source = rng.choices(names, weights)[0]
        yield rng.choice(prose) if source == "local_text" else GENERATORS[source](rng)
