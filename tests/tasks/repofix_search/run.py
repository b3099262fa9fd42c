"""A model-free repofix harness: search edits of the localised function, no model called.

Protocol as repofix's harness. ``mode.txt`` beside it chooses the search:
- ``single_edit``: every single-point edit of the function's lines (a comparison or
  arithmetic operator swapped, ``and``/``or`` swapped, a ``not`` added or removed, an
  integer constant moved by one, ``True``/``False`` swapped, ``is``/``is not``);
- ``snippet``: every statement line of the file outside the function, inserted at every
  line of the function at that line's indentation.
The function comes from the issue's traceback and the check is the failing test read back
from the issue (the reference harness's ``localise.py``). Each instance gets at most the
task's CPU-seconds per instance, its test runs counted (``BUDGET_SECONDS``).
"""

import argparse
import json
import os
import re
from pathlib import Path

import localise
import transcript

HERE = Path(__file__).parent
BUDGET_SECONDS = float(os.environ.get("SEARCH_BUDGET_SECONDS", "20"))
SWAPS = [("==", "!="), ("!=", "=="), ("<=", ">"), (">=", "<"), (" < ", " >= "),
         (" > ", " <= "), (" + ", " - "), (" - ", " + "), (" and ", " or "),
         (" or ", " and "), ("True", "False"), ("False", "True"), (" is not ", " is "),
         (" is ", " is not "), ("if not ", "if "), ("if ", "if not "), (" in ", " not in ")]


def used() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def single_edits(lines: list[str], start: int, end: int):
    for index in range(start - 1, end):
        line = lines[index]
        for old, new in SWAPS:
            for match in re.finditer(re.escape(old), line):
                yield index, [line[:match.start()] + new + line[match.end():]]
        for match in re.finditer(r"\b\d+\b", line):
            for delta in (1, -1):
                value = str(int(match.group()) + delta)
                yield index, [line[:match.start()] + value + line[match.end():]]


def snippets(lines: list[str], start: int, end: int):
    statements = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if start <= number <= end or not text or text.startswith(("#", "def ", "class ", "@")):
            continue
        if not text.endswith((":", ",", "(", "[", "{", "\\")) and line.startswith(" "):
            statements.append(text)
    for text in dict.fromkeys(statements):
        for index in range(start, end):
            indent = lines[index][:len(lines[index]) - len(lines[index].lstrip())]
            yield index, [indent + text + "\n", lines[index]]


def search(folder: Path, issue: str, mode: str) -> tuple[str, dict]:
    before = transcript.snapshot(folder)
    found = localise.locate(issue, folder)
    tests = localise.add_reproduction(folder, issue)
    if found is None or tests is None:
        return "", {"tried": 0}
    path, (_, start, end) = found
    file = folder / path
    original = file.read_text()
    lines = original.splitlines(keepends=True)
    edits = single_edits if mode == "single_edit" else snippets
    spent = used()
    fixed = None
    tried = 0
    for index, replacement in edits(lines, start, end):
        if used() - spent > BUDGET_SECONDS:
            break
        tried += 1
        file.write_text("".join(lines[:index] + replacement + lines[index + 1:]))
        if localise.passes(folder, tests, 30):
            fixed = file.read_text()
            break
    for name, text in before.items():
        (folder / name).write_text(text)
    if fixed is not None:
        file.write_text(fixed)
    return transcript.diff(before, folder), {"tried": tried, "seconds": used() - spent}


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--inputs", "--base-url", "--out", "--decoding"):
        parser.add_argument(flag)
    args = parser.parse_args()
    mode = (HERE / "mode.txt").read_text().strip()
    with open(args.out, "w") as out:
        for line in Path(args.inputs).read_text().splitlines():
            instance = json.loads(line)
            diff, info = search(Path(instance["workspace"]), instance["input"]["issue"], mode)
            out.write(json.dumps({"id": instance["id"], "output": diff, "trajectory": info})
                      + "\n")
            out.flush()


if __name__ == "__main__":
    main()
