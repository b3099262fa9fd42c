"""dsl: program synthesis from three input/output examples (trusted task code).

An item shows three examples of a hidden program: one or two plain operations, then one
operation with a four-letter literal (``append kqvz``). The literal makes the
program space too large to search within the harness's CPU budget (see ``task.toml``): a system
needs a model that proposes programs. The label holds the program and three hidden inputs
with their outputs, on which the predicted program is scored. The initial training data is
flawed: a fifth of the programs are wrong, some rows are repeated, some write programs in
other syntaxes, and three-step programs are rare although half of the evaluation items
need three.
"""

import json
import random
import string
from pathlib import Path

from vtbench.tasks.fingerprints import is_specific
from vtbench.tasks.registry import import_file

dsl = import_file(Path(__file__).parent / "public" / "harness" / "dsl.py", "dsl_language")

NAMES = sorted(dsl.OPERATIONS)
LITERAL_NAMES = sorted(dsl.LITERAL_OPERATIONS)
PROMPT = "{examples}program:"


def random_word(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 7)))


def random_program(rng: random.Random, two_op_share: float = 0.5) -> str:
    """One or two plain operations, then a literal operation."""
    length = 2 if rng.random() < two_op_share else 1
    steps = [rng.choice(NAMES) for _ in range(length)]
    literal = "".join(rng.choices(string.ascii_lowercase, k=dsl.LITERAL_LENGTH))
    return " | ".join([*steps, f"{rng.choice(LITERAL_NAMES)} {literal}"])


def make_item(rng: random.Random, two_op_share: float = 0.5) -> dict:
    program = random_program(rng, two_op_share)
    words = []
    while len(words) < 6:
        word = random_word(rng)
        if word not in words:
            words.append(word)
    pairs = [[word, dsl.run(program, word)] for word in words]
    return {"program": program, "examples": pairs[:3], "hidden": pairs[3:]}


def format_examples(examples: list[list[str]]) -> str:
    return "".join(f"in: {source} out: {target}\n" for source, target in examples)


def normalize(instance_input: dict) -> str:
    return " ".join(f"{a}>{b}" for a, b in instance_input["examples"]).lower()


def build_split(rng: random.Random, size: int, exclude: set[str]) -> list[dict]:
    items: list[dict] = []
    while len(items) < size:
        item = make_item(rng)
        instance_input = {"examples": item["examples"]}
        key = normalize(instance_input)
        if key in exclude:
            continue
        exclude.add(key)
        items.append({"input": instance_input,
                      "label": {"program": item["program"], "hidden": item["hidden"]}})
    return items


def fingerprint_strings(item: dict) -> list[str]:
    """What identifies an item in a file, for the leak audit: its program, its example and
    hidden pairs as a prompt shows them (``in: abcd out: ABCDxyzq``) and each list of pairs
    as JSON writes it. Its words alone are short random strings, and a name-shaped string
    is no fingerprint (``vtbench.tasks.fingerprints``)."""
    label = item["label"]
    pairs = [*item.get("input", {}).get("examples", []), *label["hidden"]]
    lists = [item["input"]["examples"]] if "input" in item else []
    return [text for text in [label["program"], *(f"in: {a} out: {b}" for a, b in pairs),
                              *(json.dumps(each) for each in [*lists, label["hidden"]])]
            if is_specific(text)]


def _flawed_row(rng: random.Random, item: dict) -> dict:
    program = item["program"]
    if rng.random() < 0.2:
        program = random_program(rng)
    junk = rng.random()
    if junk < 0.06:
        program = program.replace(" | ", ", ")
    elif junk < 0.12:
        program = program.upper()
    return {"prompt": PROMPT.format(examples=format_examples(item["examples"])),
            "completion": f" {program}"}


def public_rows(seed: int = 20261130, size: int = 1500) -> list[dict]:
    """The initial training data (deterministic)."""
    rng = random.Random(seed)
    rows = [_flawed_row(rng, make_item(rng, two_op_share=0.12)) for _ in range(size)]
    rows += rng.sample(rows, size // 6)
    rng.shuffle(rows)
    return rows


def row_input(row: dict) -> dict | None:
    examples = []
    for line in row.get("prompt", "").splitlines():
        if line.startswith("in: ") and " out: " in line:
            source, target = line[4:].split(" out: ", 1)
            examples.append([source, target])
    return {"examples": examples} if examples else None
