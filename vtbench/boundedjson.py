"""JSON from untrusted bytes with its nesting bounded.

Python's parser recurses once per level, so ``"[" * 100000`` raises ``RecursionError``
(not a ``ValueError``), and a value nested a few hundred levels deep still makes every
recursive reader after it (``json.dumps``, a walk for a key) fail the same way. Whatever
reads JSON that a candidate wrote parses it here: too deep is a ``ValueError`` like any
other malformed JSON, so the caller's handling of bad input covers it.
"""

import json
from typing import Any

MAX_DEPTH = 64
"""Deeper than any config, safetensors header or harness output line we read."""


class TooDeep(ValueError):
    """The JSON value nests deeper than allowed."""


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that raises :class:`TooDeep` for values nested over ``max_depth``."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(f"nested deeper than {max_depth} levels") from None
    if depth(value, max_depth) > max_depth:
        raise TooDeep(f"nested deeper than {max_depth} levels")
    return value


def depth(value: Any, stop_after: int) -> int:
    """Nesting depth of a parsed value (a scalar is 0), counted without recursion;
    counting ends once it passes ``stop_after``."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict | list):
            level += 1
            deepest = max(deepest, level)
            if deepest > stop_after:
                return deepest
            pending.extend((child, level) for child in
                           (item.values() if isinstance(item, dict) else item))
    return deepest
