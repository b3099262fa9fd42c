"""toolcalc: arithmetic questions that need a calculator (trusted task code; never shown to the
agent).

Questions ask for a product of a 2-3 digit and a 2 digit number, a sum of several 3 digit
numbers, or a product plus an offset, each in several phrasings; a tiny model cannot
compute these reliably itself but can learn to write ``Calc: EXPR=`` so that the fixed
harness fills in the result. ``build_split`` draws questions from a secret-seeded generator
and leaves out any whose normalised text appears in the public training data.
``public_rows`` makes the initial training data, realistically flawed: two rows in five
answer directly without the calculator, some answers and calculator lines are wrong,
duplicates, format junk, and a phrasing mix that differs from the evaluation splits. One
flaw is systematic and passes every check of a row against its own question (the numbers
used are the question's, the result is computed right, the answer is the result): every
"plus/then add/more are loose" row forgets its offset, every sum written with "plus" its
last term, and every "apples on N days" row adds the day count to the sum
(:func:`slipped`); only reading the question again (relabelling) repairs them.
Number ranges, noise rates and phrasing weights are parameters, so calibration can tune
them.
"""

import random
import re
from dataclasses import dataclass
from functools import cache

PROMPT = "Question: {question}\n"


@dataclass(frozen=True)
class Ranges:
    """Operand ranges (inclusive): the difficulty knobs of the generator."""

    factor: tuple[int, int] = (12, 999)
    multiplier: tuple[int, int] = (12, 99)
    term: tuple[int, int] = (100, 999)
    terms: tuple[int, int] = (3, 4)
    offset: tuple[int, int] = (10, 999)


RANGES = Ranges()


@dataclass(frozen=True)
class Phrasing:
    """A question pattern of one kind: ``product`` ({a}*{b}), ``sum`` ({terms_*}) or
    ``product_plus`` ({a}*{b}+{c}); sums name their terms as ``{terms_and}`` ("1, 2 and 3")
    or ``{terms_plus}`` ("1 plus 2 plus 3") and may state their count ``{n}``."""

    kind: str
    pattern: str


PHRASINGS = [
    Phrasing("product", "What is {a} times {b}?"),
    Phrasing("product", "Multiply {a} by {b}."),
    Phrasing("product", "What is the product of {a} and {b}?"),
    Phrasing("product", "A crate holds {a} jars. How many jars are in {b} crates?"),
    Phrasing("sum", "What is {terms_plus}?"),
    Phrasing("sum", "Add {terms_and}."),
    Phrasing("sum", "What is the sum of {terms_and}?"),
    Phrasing("sum", "A farm picked {terms_and} apples on {n} days. How many in total?"),
    Phrasing("product_plus", "What is {a} times {b} plus {c}?"),
    Phrasing("product_plus", "Multiply {a} by {b}, then add {c}."),
    Phrasing("product_plus", "{b} boxes hold {a} pens each and {c} more are loose. "
                             "How many pens are there?"),
]
SPLIT_WEIGHTS = (1.0,) * len(PHRASINGS)
# The public data is mostly the "What is ... times/plus ..." phrasings.
PUBLIC_WEIGHTS = (0.35, 0.04, 0.02, 0.01, 0.30, 0.03, 0.02, 0.01, 0.18, 0.02, 0.02)


def _operands(rng: random.Random, kind: str, ranges: Ranges) -> dict:
    if kind == "sum":
        terms = [rng.randint(*ranges.term) for _ in range(rng.randint(*ranges.terms))]
        return {"terms": terms}
    values = {"a": rng.randint(*ranges.factor), "b": rng.randint(*ranges.multiplier)}
    if kind == "product_plus":
        values["c"] = rng.randint(*ranges.offset)
    return values


def expression(kind: str, values: dict) -> str:
    """The calculator expression a question asks for."""
    if kind == "sum":
        return "+".join(map(str, values["terms"]))
    return f"{values['a']}*{values['b']}" + (f"+{values['c']}" if "c" in values else "")


def evaluate_expression(expr: str) -> int:
    """The value of a generated expression (only the builder's own ``a*b+c`` forms)."""
    return sum(eval_product(term) for term in expr.split("+"))


def eval_product(term: str) -> int:
    a, _, b = term.partition("*")
    return int(a) * int(b) if b else int(a)


def make_question(rng: random.Random, weights: tuple[float, ...] = SPLIT_WEIGHTS,
                  ranges: Ranges = RANGES) -> dict:
    """One question with its calculator expression and answer."""
    phrasing = rng.choices(PHRASINGS, weights)[0]
    values = _operands(rng, phrasing.kind, ranges)
    terms = [str(t) for t in values.get("terms", [])]
    question = phrasing.pattern.format(
        terms_and=", ".join(terms[:-1]) + f" and {terms[-1]}" if terms else "",
        terms_plus=" plus ".join(terms), n=len(terms), **values)
    expr = expression(phrasing.kind, values)
    return {"question": question, "expression": expr, "answer": evaluate_expression(expr)}


def slipped_expression(question: str, expression: str) -> str | None:
    """What the public data writes for ``question`` (true ``expression``) where it slips:
    the last number added forgotten (an offset, a "plus" sum's last term), a day count
    added; None where it does not."""
    if ("*" in expression and "+" in expression) or " plus " in question:
        return expression.rpartition("+")[0]
    if " days." in question:
        return f"{expression}+{expression.count('+') + 1}"
    return None


def slipped(question: dict) -> dict:
    """``question`` as the public data works it (:func:`slipped_expression`)."""
    expr = slipped_expression(question["question"], question["expression"])
    if expr is None:
        return question
    return {**question, "expression": expr, "answer": evaluate_expression(expr)}


GROUPS = {"a": r"(?P<a>\d+)", "b": r"(?P<b>\d+)", "c": r"(?P<c>\d+)", "n": r"\d+",
          "terms_and": r"(?P<terms>\d+(?:, \d+)* and \d+)",
          "terms_plus": r"(?P<terms>\d+(?: plus \d+)+)"}


@cache
def _phrasing_regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", pattern)
    return re.compile("".join(GROUPS[p] if i % 2 else re.escape(p) for i, p in enumerate(parts)))


def true_expression(question: str) -> str | None:
    """The expression of a generated question, read back through its phrasing."""
    for phrasing in PHRASINGS:
        match = _phrasing_regex(phrasing.pattern).fullmatch(question)
        if match:
            found = {k: v for k, v in match.groupdict().items() if v is not None}
            if "terms" in found:
                found["terms"] = [int(t) for t in re.findall(r"\d+", found["terms"])]
            return expression(phrasing.kind, found)
    return None


def normalize(instance_input: dict) -> str:
    return re.sub(r"[^a-z0-9]+", " ", instance_input["question"].lower()).strip()


def build_split(rng: random.Random, size: int, exclude: set[str]) -> list[dict]:
    items: list[dict] = []
    while len(items) < size:
        question = make_question(rng)
        instance_input = {"question": question["question"]}
        key = normalize(instance_input)
        if key in exclude:
            continue
        exclude.add(key)
        items.append({"input": instance_input, "label": str(question["answer"])})
    return items


def _near_miss(rng: random.Random, value: int) -> int:
    return value + rng.choice([-100, -10, -2, -1, 1, 9, 10, 100])


def _completion(rng: random.Random, question: dict, use_calc: bool, wrong: bool) -> str:
    expr, answer = question["expression"], question["answer"]
    if not use_calc:
        return f"Answer: {_near_miss(rng, answer) if wrong else answer}"
    if wrong and rng.random() < 0.5:
        result = _near_miss(rng, answer)  # a calculator line with a wrong result
    elif wrong:
        expr = expr.replace("*", "+", 1) if "*" in expr else expr.replace("+", "*", 1)
        result = evaluate_expression(expr)  # the wrong operation, computed right
    else:
        result = answer
    return f"Calc: {expr}={result}\nAnswer: {result}"


def _junk(rng: random.Random, prompt: str, completion: str) -> tuple[str, str]:
    form = rng.randrange(4)
    if form == 0:
        return prompt.replace("Question: ", "Q: "), completion
    if form == 1 and completion.startswith("Calc:"):
        calc, _, answer = completion.partition("\n")
        spaced = calc.replace("*", " x ").replace("+", " + ").replace("=", " = ")
        return prompt, f"{spaced}\n{answer}"
    if form == 2:
        return prompt, completion.replace("Answer: ", "The answer is ") + "."
    return prompt, completion.replace("Answer:", "answer=")


def public_rows(seed: int = 20261130, size: int = 1400, calc_share: float = 0.6,
                label_noise: float = 0.2, junk_rate: float = 0.1,
                duplicate_share: float = 1 / 6, ranges: Ranges = RANGES) -> list[dict]:
    """The initial training data (deterministic)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(size):
        question = make_question(rng, PUBLIC_WEIGHTS, ranges)
        use_calc, wrong = rng.random() < calc_share, rng.random() < label_noise
        prompt = PROMPT.format(question=question["question"])
        completion = _completion(rng, slipped(question), use_calc, wrong)
        if rng.random() < junk_rate:
            prompt, completion = _junk(rng, prompt, completion)
        rows.append({"prompt": prompt, "completion": completion})
    rows += rng.sample(rows, int(size * duplicate_share))
    rng.shuffle(rows)
    return rows


def row_input(row: dict) -> dict | None:
    """The instance input a training row was made from (any of its prompt formats)."""
    match = re.fullmatch(r"(?:Question|Q): (.+)\n", row.get("prompt", ""), re.S)
    return {"question": match.group(1)} if match else None
