"""Compare two versions of a data file as multisets of rows.

A row is one line of a ``.jsonl`` file (parsed, compared with sorted keys, so reordering
keys or rows is no change), one element of a top-level JSON list, or one line of any other
text file. Rows present in both versions cancel out, however often they are shuffled.
What is left is split into:

* **rewritten** rows: a removed and an added JSON object that share a *distinctive* field
  value (a string of at least 8 characters, or a value that occurs once on each side):
  the same question with a new answer is a relabel, the same answer with a new question a
  rewrite;
* **removed** rows (filtering) and **added** rows (augmentation or synthesis).

New values of a ``source``/``dataset``/``origin`` field count as new sources (mixing).
Everything here is deterministic and only parses JSON: untrusted data is never executed.
"""

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

SOURCE_KEYS = ("source", "dataset", "origin")
DISTINCTIVE_LENGTH = 8
MAX_POSTINGS = 64
"""A field value shared by more added rows than this is too common to pair rows by."""


@dataclass
class RowDelta:
    removed: int = 0
    added: int = 0
    rewritten: int = 0
    new_sources: set[str] = field(default_factory=set)


def diff_rows(path: str, old: bytes | None, new: bytes | None) -> RowDelta:
    """Rows removed, added and rewritten between two versions of one data file."""
    old_rows, new_rows = _rows(path, old), _rows(path, new)
    before, after = Counter(old_rows), Counter(new_rows)
    removed = list((before - after).elements())
    added = list((after - before).elements())
    if path.endswith((".jsonl", ".ndjson", ".json")):
        removed, added = _cancel_canonical(removed, added)
    removed_rows, added_rows = _parsed(removed), _parsed(added)
    delta = RowDelta(new_sources=_sources(added_rows))
    if delta.new_sources:  # parse the whole old file only when new rows name a source
        delta.new_sources -= _sources(_parsed(old_rows))
    pairs = _pair_rewrites(removed_rows, added_rows)
    delta.rewritten = pairs
    delta.removed = len(removed) - pairs
    delta.added = len(added) - pairs
    return delta


def _rows(path: str, blob: bytes | None) -> list[str]:
    if blob is None:
        return []
    text = blob.decode("utf-8", errors="replace")
    if path.endswith(".json"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, list):
            return [json.dumps(item, sort_keys=True) for item in value]
    return [line.strip() for line in text.splitlines() if line.strip()]


def _canonical(row: str) -> str:
    try:
        return json.dumps(json.loads(row), sort_keys=True, ensure_ascii=False)
    except (ValueError, RecursionError):
        return row


def _cancel_canonical(removed: list[str], added: list[str]) -> tuple[list[str], list[str]]:
    """Rows that differ only in key order or spacing are the same row."""
    before = Counter(_canonical(r) for r in removed)
    after = Counter(_canonical(r) for r in added)
    return list((before - after).elements()), list((after - before).elements())


def _parsed(rows: list[str]) -> list[Any]:
    parsed = []
    for row in rows:
        try:
            parsed.append(json.loads(row))
        except (ValueError, RecursionError):
            parsed.append(row)
    return parsed


def _sources(rows: list[Any]) -> set[str]:
    return {str(row[key]) for row in rows if isinstance(row, dict)
            for key in SOURCE_KEYS if key in row}


def _fields(row: dict[str, Any]) -> list[tuple[str, str]]:
    return [(key, json.dumps(value, sort_keys=True)) for key, value in row.items()]


def _pair_rewrites(removed: list[Any], added: list[Any]) -> int:
    """How many removed rows can be matched one-to-one with an added row they resemble."""
    old_dicts = [r for r in removed if isinstance(r, dict)]
    new_dicts = [r for r in added if isinstance(r, dict)]
    if not old_dicts or not new_dicts:
        return 0
    postings: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(new_dicts):
        for item in _fields(row):
            postings.setdefault(item, []).append(index)
    old_counts = Counter(item for row in old_dicts for item in _fields(row))
    used: set[int] = set()
    for row in sorted(old_dicts, key=lambda r: json.dumps(r, sort_keys=True)):
        match = _best_match(row, postings, old_counts, used)
        if match is not None:
            used.add(match)
    return len(used)


def _best_match(row: dict[str, Any], postings: dict[tuple[str, str], list[int]],
                old_counts: Counter[tuple[str, str]], used: set[int]) -> int | None:
    votes: Counter[int] = Counter()
    for item in _fields(row):
        candidates = postings.get(item, [])
        long_string = item[1].startswith('"') and len(item[1]) >= DISTINCTIVE_LENGTH + 2
        distinctive = long_string or (len(candidates) == 1 and old_counts[item] == 1)
        if not distinctive or len(candidates) > MAX_POSTINGS:
            continue
        for index in candidates:
            if index not in used:
                votes[index] += 1
    if not votes:
        return None
    return min(votes, key=lambda index: (-votes[index], index))
