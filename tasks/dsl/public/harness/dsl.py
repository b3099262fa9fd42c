"""The string-transformation DSL of the dsl task.

A program is operations separated by " | ", applied left to right (at most four):

    upper    letters to capitals           reverse  reverse the string
    double   the string twice              first3   the first three characters
    last3    the last three characters     drop1    drop the first character
    sort     characters in sorted order
    append XYZ    add XYZ at the end       prepend XYZ   add XYZ at the start
                  (XYZ: four lowercase letters, e.g. "append kqvz")

Example: "reverse | upper | append kqvz" turns "abc" into "CBAkqvz".
"""

import string

OPERATIONS = {
    "upper": str.upper,
    "reverse": lambda s: s[::-1],
    "double": lambda s: s + s,
    "first3": lambda s: s[:3],
    "last3": lambda s: s[-3:],
    "drop1": lambda s: s[1:],
    "sort": lambda s: "".join(sorted(s)),
}
LITERAL_OPERATIONS = {
    "append": lambda s, literal: s + literal,
    "prepend": lambda s, literal: literal + s,
}
LITERAL_LENGTH = 4


def is_literal(word: str) -> bool:
    return len(word) == LITERAL_LENGTH and all(c in string.ascii_lowercase for c in word)


def parse_step(step: str) -> tuple[str, str | None] | None:
    words = step.split()
    if len(words) == 1 and words[0] in OPERATIONS:
        return words[0], None
    if len(words) == 2 and words[0] in LITERAL_OPERATIONS and is_literal(words[1]):
        return words[0], words[1]
    return None


def parse(program: str) -> list[tuple[str, str | None]] | None:
    """The steps (operation, literal or None) of a program, or None if it is not valid."""
    steps = [parse_step(part) for part in program.strip().split("|")]
    if not steps or len(steps) > 4 or any(step is None for step in steps):
        return None
    return steps  # type: ignore[return-value]


def run(program: str, text: str) -> str | None:
    """Apply a program to a string; None if the program is invalid."""
    steps = parse(program)
    if steps is None:
        return None
    for name, literal in steps:
        text = (OPERATIONS[name](text) if literal is None
                else LITERAL_OPERATIONS[name](text, literal))
    return text
