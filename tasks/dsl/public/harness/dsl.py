"""The string-transformation DSL of the dsl task.

A program is one or more operations separated by " | ", applied left to right:

    upper    letters to capitals           reverse  reverse the string
    double   the string twice              first3   the first three characters
    last3    the last three characters     drop1    drop the first character
    sort     characters in sorted order

Example: "reverse | upper" turns "abc" into "CBA".
"""

OPERATIONS = {
    "upper": str.upper,
    "reverse": lambda s: s[::-1],
    "double": lambda s: s + s,
    "first3": lambda s: s[:3],
    "last3": lambda s: s[-3:],
    "drop1": lambda s: s[1:],
    "sort": lambda s: "".join(sorted(s)),
}


def parse(program: str) -> list[str] | None:
    """The operation names of a program, or None if it is not a valid program."""
    names = [part.strip() for part in program.strip().split("|")]
    if not names or len(names) > 4 or any(name not in OPERATIONS for name in names):
        return None
    return names


def run(program: str, text: str) -> str | None:
    """Apply a program to a string; None if the program is invalid."""
    names = parse(program)
    if names is None:
        return None
    for name in names:
        text = OPERATIONS[name](text)
    return text
