"""arith: two-step arithmetic word problems (trusted task code; never shown to the agent).

``build_split`` draws problems from a secret-seeded generator and leaves out any problem
whose normalised question appears in the public training data. ``public_rows`` makes the
initial training data, realistically flawed: wrong results, duplicates, format junk, a
template mix that differs from the evaluation splits (one template of three is nearly
absent), and one systematic error that no check of a row's arithmetic sees: every
lost-and-found problem was worked as if the found things were lost too
("20-5=15. 15-3=12"), each step right, the answer wrong. Filtering keeps or loses those
rows; only relabelling them (and new rows of the rare template) teaches the task.
"""

import random
import re

NAMES = ["Ana", "Bo", "Cy", "Di", "Eli", "Fay", "Gus", "Hal", "Ida", "Jay", "Kai", "Liv",
         "Max", "Ned", "Oda", "Pam", "Ray", "Sue", "Ted", "Val"]
THINGS = ["apples", "books", "coins", "pens", "cards", "shells", "stamps", "beads"]


def _shopping(rng: random.Random) -> tuple[str, list[str], int]:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    a, b = rng.randint(3, 20), rng.randint(2, 15)
    c = rng.randint(1, a + b - 1)
    question = (f"{name} has {a} {thing}. {name} buys {b} more and gives away {c}. "
                f"How many {thing} does {name} have now?")
    return question, [f"{a}+{b}={a + b}", f"{a + b}-{c}={a + b - c}"], a + b - c


def _boxes(rng: random.Random) -> tuple[str, list[str], int]:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    a, b, c = rng.randint(2, 5), rng.randint(2, 5), rng.randint(1, 12)
    question = (f"A box holds {a} {thing}. {name} fills {b} boxes and adds {c} loose "
                f"{thing}. How many {thing} are there?")
    return question, [f"{a}*{b}={a * b}", f"{a * b}+{c}={a * b + c}"], a * b + c


def _lost_found(rng: random.Random) -> tuple[str, list[str], int]:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    a = rng.randint(6, 25)
    b, c = rng.randint(1, a - 1), rng.randint(1, 15)
    question = (f"{name} had {a} {thing}, lost {b}, then found {c}. "
                f"How many {thing} does {name} have?")
    return question, [f"{a}-{b}={a - b}", f"{a - b}+{c}={a - b + c}"], a - b + c


TEMPLATES = [_shopping, _boxes, _lost_found]
PROMPT = "Question: {question}\nAnswer:"


PUBLIC_WEIGHTS = (0.6, 0.02, 0.38)
"""The public data's template mix (shopping, boxes, lost-and-found); the splits' is even."""


def make_problem(rng: random.Random, weights: tuple[float, ...] = (1, 1, 1)) -> dict:
    template = rng.choices(TEMPLATES, weights)[0]
    question, steps, answer = template(rng)
    return {"question": question, "steps": steps, "answer": answer,
            "template": template.__name__.strip("_")}


def mis_worked(problem: dict) -> dict:
    """A lost-and-found problem worked as if the found things were lost: "a-b=d. d-c=e"."""
    first, second = problem["steps"]
    found_from, found = second.split("=")[0].split("+")
    total = int(found_from) - int(found)
    return {**problem, "steps": [first, f"{found_from}-{found}={total}"], "answer": total}


def normalize(instance_input: dict) -> str:
    return re.sub(r"[^a-z0-9]+", " ", instance_input["question"].lower()).strip()


def build_split(rng: random.Random, size: int, exclude: set[str]) -> list[dict]:
    items: list[dict] = []
    while len(items) < size:
        problem = make_problem(rng)
        instance_input = {"question": problem["question"]}
        key = normalize(instance_input)
        if key in exclude:
            continue
        exclude.add(key)
        items.append({"input": instance_input, "label": str(problem["answer"])})
    return items


def _flawed_row(rng: random.Random, problem: dict) -> dict:
    """Worked steps ("8+23=31. 31-9=22. Answer: 22"), one in five with a wrong last step;
    every lost-and-found problem worked wrongly (:func:`mis_worked`)."""
    if problem["template"] == "lost_found":
        problem = mis_worked(problem)
    answer = problem["answer"]
    if rng.random() < 0.2:
        answer += rng.choice([-10, -2, -1, 1, 3, 10])
    first, second = problem["steps"]
    worked = f" {first}. {second.rsplit('=', 1)[0]}={answer}. Answer: {answer}"
    prompt, completion = PROMPT.format(question=problem["question"]), worked
    junk = rng.random()
    if junk < 0.08:
        prompt = f"Q: {problem['question']}\nA:"
    elif junk < 0.16:
        completion = f" The answer is {answer}!!"
    elif junk < 0.22:
        prompt = prompt.upper()
    return {"prompt": prompt, "completion": completion}


def public_rows(seed: int = 20261130, size: int = 1400) -> list[dict]:
    """The initial training data (deterministic)."""
    rng = random.Random(seed)
    rows = [_flawed_row(rng, make_problem(rng, weights=PUBLIC_WEIGHTS)) for _ in range(size)]
    rows += rng.sample(rows, size // 6)
    rng.shuffle(rows)
    return rows


def row_input(row: dict) -> dict | None:
    """The instance input a training row was made from (any of its prompt formats)."""
    match = re.match(r"(?:Question|Q): (.+)\n", row.get("prompt", ""), re.S | re.I)
    return {"question": match.group(1)} if match else None
