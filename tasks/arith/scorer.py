"""arith scorer (trusted): exact match of the last integer in the output with the label."""

import re


def score(item: dict, output: str) -> float:
    numbers = re.findall(r"-?\d+", output)
    return 1.0 if numbers and numbers[-1] == item["label"] else 0.0
