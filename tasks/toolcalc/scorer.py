"""toolcalc scorer (trusted): exact match of the answer's integer with the label.

The harness's output is the text of the model's "Answer:" line; its last integer must equal
the true answer.
"""

import re


def score(item: dict, output: str) -> float:
    numbers = re.findall(r"-?\d+", output)
    return 1.0 if numbers and numbers[-1] == item["label"] else 0.0
