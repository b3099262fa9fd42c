"""toolcalc reference solution: scripted changes to data and trainer (the harness is fixed).

Data: read the question back out of every row (either prompt format), turn it into its
calculator expression with a parser of the question phrasings, rewrite every completion
as a calculator call followed by the answer ("Calc: 47*83=3901\nAnswer: 3901", results
recomputed), remove duplicates and synthesise questions of the phrasings the data
under-represents. Trainer: completion-only loss, warm-up and cosine decay,
400 steps (the initial 300).
"""

import random
import re
from pathlib import Path

from vtbench.tasks.tiny_reference import improve_trainer, read_rows, write_rows

LIST = r"(\d+(?:, \d+)* and \d+)"
PRODUCT, SUM, PRODUCT_PLUS = "{0}*{1}", "sum", "{0}*{1}+{2}"
PATTERNS = [(re.compile(pattern), form) for pattern, form in (
    (r"What is (\d+) times (\d+)\?", PRODUCT),
    (r"Multiply (\d+) by (\d+)\.", PRODUCT),
    (r"What is the product of (\d+) and (\d+)\?", PRODUCT),
    (r"A crate holds (\d+) jars\. How many jars are in (\d+) crates\?", PRODUCT),
    (r"What is (\d+(?: plus \d+)+)\?", SUM),
    (rf"Add {LIST}\.", SUM),
    (rf"What is the sum of {LIST}\?", SUM),
    (rf"A farm picked {LIST} apples on \d+ days\. How many in total\?", SUM),
    (r"What is (\d+) times (\d+) plus (\d+)\?", PRODUCT_PLUS),
    (r"Multiply (\d+) by (\d+), then add (\d+)\.", PRODUCT_PLUS),
    (r"(\d+) boxes hold (\d+) pens each and (\d+) more are loose\. How many pens are there\?",
     PRODUCT_PLUS),
)]
PROMPT = "Question: {question}\n"


def calc_expression(question: str) -> str | None:
    """The calculator expression that answers ``question``, or None for an unknown phrasing."""
    for pattern, form in PATTERNS:
        match = pattern.fullmatch(question)
        if match:
            if form == SUM:
                return "+".join(re.findall(r"\d+", match.group(1)))
            return form.format(*match.groups())
    return None


def value(expression: str) -> int:
    """The value of a sum of products of integers (the only forms calc_expression makes)."""
    total = 0
    for term in expression.split("+"):
        product = 1
        for factor in term.split("*"):
            product *= int(factor)
        total += product
    return total


def clean_row(row: dict) -> dict | None:
    match = re.fullmatch(r"(?:Question|Q): (.+)\n", row.get("prompt", ""), re.S)
    expression = calc_expression(match.group(1)) if match else None
    if match is None or expression is None:
        return None
    result = value(expression)
    return {"prompt": PROMPT.format(question=match.group(1)),
            "completion": f"Calc: {expression}={result}\nAnswer: {result}"}


def apply_data(data_dir: Path, task) -> None:
    cleaned = {}
    for row in read_rows(data_dir):
        fixed = clean_row(row)
        if fixed:
            cleaned[fixed["prompt"]] = fixed
    rng = random.Random(7)
    while len(cleaned) < 2400:
        question = task.builder.make_question(rng)
        fixed = clean_row({"prompt": PROMPT.format(question=question["question"])})
        if fixed:
            cleaned[fixed["prompt"]] = fixed
    write_rows(data_dir, list(cleaned.values()))


def apply_trainer(trainer_dir: Path, task) -> None:
    improve_trainer(trainer_dir, steps=400, lr=1e-3, schedule="cosine", warmup_steps=20)


apply_harness = None
