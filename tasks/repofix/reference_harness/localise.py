"""Localising the bug and reproducing it from the issue (standard library only).

The issue holds pytest's report of each failing test: the test's source, then the
traceback through the library (``path:line:`` frames). The deepest frame in a library file
of the workspace names the function to fix; where no frame does, a function that the test
calls by name. The test's source, read back from the report and added to its own test
file, is the reproduction: it fails on the buggy tree and must pass after a fix.
"""

import ast
import re
import subprocess
from pathlib import Path

import transcript

FRAME = re.compile(r"^([\w./-]+\.py):(\d+): ", re.MULTILINE)
FAILING = re.compile(r"^Failing test: (\S+)$", re.MULTILINE)
REPRODUCTION = "test_repofix_reproduction"


def functions(path: Path) -> list[tuple[str, int, int]]:
    """(name, first line with decorators, last line) of each function and method."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found.append((node.name, start, node.end_lineno or node.lineno))
    return found


def enclosing(path: Path, line: int) -> tuple[str, int, int] | None:
    around = [f for f in functions(path) if f[1] <= line <= f[2]]
    return min(around, key=lambda f: f[2] - f[1]) if around else None


def is_test(path: str) -> bool:
    return any(part.startswith("test") for part in Path(path).parts)


def locate(issue: str, folder: Path) -> tuple[str, tuple[str, int, int]] | None:
    """(path, function) of the deepest library frame, else a library function the failing
    test's source names."""
    for path, line in reversed(FRAME.findall(issue)):
        if not is_test(path) and (folder / path).is_file():
            found = enclosing(folder / path, int(line))
            if found:
                return path, found
    names = set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", issue))
    for path in sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.py")):
        if is_test(path):
            continue
        for function in functions(folder / path):
            if function[0] in names and not function[0].startswith("_"):
                return path, function
    return None


def test_source(issue: str) -> tuple[str, str] | None:
    """(test file, source of the first failing test) read back from the report: pytest
    prints each source line after a four-character gutter (``>`` marks the failing line),
    the ``def`` line first; caret lines and everything from the first ``E`` line on are
    not source."""
    match = FAILING.search(issue)
    if not match or match.group(1).count("::") != 1 or "[" in match.group(1):
        return None
    report = issue[match.end():].split("\n\n", 1)[-1]
    lines = report.splitlines()
    if not lines or not lines[0].startswith("def "):
        return None
    body = []
    for line in lines[1:]:
        if line.startswith("E ") or FRAME.match(line) or line.startswith("_ _"):
            break
        if line.strip() and not line.strip().strip("^~"):
            continue
        body.append(line[4:])
    header = re.sub(r"def \w+", f"def {REPRODUCTION}", lines[0], count=1)
    return match.group(1).split("::")[0], "\n".join([header, *body]).rstrip() + "\n"


def add_reproduction(folder: Path, issue: str) -> list[str] | None:
    """Add the reproduction to its test file; the pytest ids to run, or None."""
    found = test_source(issue)
    if found is None or not (folder / found[0]).is_file():
        return None
    path = folder / found[0]
    text = path.read_text()
    try:
        ast.parse(text + "\n\n" + found[1])
    except SyntaxError:
        return None
    path.write_text(text + "\n\n" + found[1])
    return [f"{found[0]}::{REPRODUCTION}", found[0]]


def passes(folder: Path, tests: list[str], timeout: float) -> bool:
    try:
        done = subprocess.run(["python", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               "-o", "addopts=", *tests], cwd=folder, capture_output=True,
                              timeout=timeout, env=transcript.python_env(folder))
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0
