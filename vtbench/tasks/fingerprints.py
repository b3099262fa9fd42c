"""What a fingerprint of split data is: a span of an item that no unrelated file holds.

The leak audit (:mod:`vtbench.episode.leak_audit`) searches every file a research sandbox
shows for the fingerprints of a task's secret items, and a hit refuses the episode. A
fingerprint that an unrelated file holds by chance refuses every episode on every host
that has the file: HumanEval's entry points (``remove_duplicates``,
``greatest_common_divisor``) are function names of setuptools, transformers and cmake's
documentation, so every Python environment with those packages was refused.

The rule: a fingerprint is a *span* of an item, never a *name*. It holds at least
:data:`MIN_LENGTH` characters and :data:`MIN_WORDS` whitespace-separated words; an
identifier, a dotted or slashed name, a path, an id or a call written without spaces holds
one word and never qualifies. A builder's ``fingerprint_strings(item)`` names only such
spans (whole lines of the item, its sentences, its rows as shipped), or the audit refuses
the task. Whether a span is a *common* phrase its shape cannot tell: builders leave out
the phrases many items share (HumanEval's ``from typing import List``, BFCL's function
documents), the audit drops a span that two secret items name or that the task's public
material holds, and a test searches a full Python environment for every task's spans.
"""

MIN_LENGTH = 16
"""Fewest characters of a fingerprint (leading and trailing whitespace left out)."""
MIN_WORDS = 3
"""Fewest whitespace-separated words of a fingerprint: a name is one word."""


def is_specific(text: str) -> bool:
    """Whether ``text`` is shaped as a fingerprint: a span, not a name or a short string."""
    stripped = text.strip()
    return len(stripped) >= MIN_LENGTH and len(stripped.split()) >= MIN_WORDS
