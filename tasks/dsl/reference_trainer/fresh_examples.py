"""Each training row, and two more of its program shown on new words.

The dsl reference copies this module and the task's interpreter (``dsl.py``) into
``trainer/``, and ``train.py`` reads its rows through :func:`with_fresh_examples`: every
program of the data is seen on three sets of examples instead of one. A label that does not
run (malformed, or in another syntax) keeps only its own row.
"""

import random
import string

import dsl

COPIES = 2


def fresh_rows(row: dict, rng: random.Random, copies: int = COPIES) -> list[dict]:
    """``row``, then up to ``copies`` rows of its program run on three new words each."""
    program = row["completion"].strip()
    rows = [row]
    for _ in range(copies):
        words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 7)))
                 for _ in range(3)]
        outputs = [dsl.run(program, word) for word in words]
        if any(output is None for output in outputs):
            return rows
        pairs = zip(words, outputs, strict=True)
        shown = "".join(f"in: {word} out: {output}\n" for word, output in pairs)
        rows.append({"prompt": shown + "program:", "completion": row["completion"]})
    return rows


def with_fresh_examples(rows: list[dict], seed: int) -> list[dict]:
    rng = random.Random(seed + 1)
    return [each for row in rows for each in fresh_rows(row, rng)]
