"""extract scorer (trusted): field-level F1 of the predicted JSON object against the label.

The whole output must parse as one JSON object, or the instance scores 0. Its (key, value)
pairs are compared with the label's: keys exactly, values after trimming whitespace and
ignoring case, with a number and its decimal string counting as equal (``34`` == ``"34"``).
A nested value, list, boolean or null never matches. The score is the F1 of precision
(matched / predicted pairs) and recall (matched / label pairs); an empty prediction for an
empty label scores 1.
"""

import json


def canonical(value: object) -> str | None:
    """The comparable form of a JSON value, or None when it can never match a label value."""
    if isinstance(value, bool) or value is None or isinstance(value, list | dict):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return " ".join(str(value).split()).casefold()


def pairs(obj: dict) -> set[tuple[str, str]]:
    return {(key, text) for key, value in obj.items()
            if (text := canonical(value)) is not None}


def field_f1(predicted: dict, label: dict) -> float:
    gold = pairs(label)
    if not predicted and not gold:
        return 1.0
    matched = len(pairs(predicted) & gold)
    if matched == 0:
        return 0.0
    precision, recall = matched / len(predicted), matched / len(gold)
    return 2 * precision * recall / (precision + recall)


def score(item: dict, output: str) -> float:
    try:
        predicted = json.loads(output)
    except (json.JSONDecodeError, RecursionError):
        return 0.0
    if not isinstance(predicted, dict):
        return 0.0
    return field_f1(predicted, item["label"])
