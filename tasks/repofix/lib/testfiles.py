"""Taking tests out of a tree and naming them (trusted task code).

A harness gets an instance's tree without the tests that the bug makes fail (as a
repository before the issue's tests were written); the scorer restores every test. A test
id is pytest's (``path::Class::name[param]``); its function is deleted whole, decorators
and every parametrisation included, and a class left empty gets ``pass``.
"""

import ast
from collections import defaultdict
from pathlib import Path


def split_id(test_id: str) -> tuple[str, list[str]]:
    path, *names = test_id.split("[", 1)[0].split("::")
    return path, names


def find(tree: ast.Module, names: list[str]) -> tuple[ast.stmt, list[ast.stmt]] | None:
    """The definition that ``names`` (class path, then function) points at, with the block
    that holds it."""
    block: list[ast.stmt] = tree.body
    for index, name in enumerate(names):
        found = next((node for node in block if isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name),
            None)
        if found is None:
            return None
        if index == len(names) - 1:
            return found, block
        block = found.body
    return None


def removable(root: Path, test_id: str) -> bool:
    path, names = split_id(test_id)
    file = root / path
    return bool(names) and file.is_file() and find(ast.parse(file.read_text()), names) is not None


def remove_tests(root: Path, test_ids: list[str]) -> None:
    """Delete the functions of ``test_ids`` from their files under ``root``."""
    by_file: dict[str, list[list[str]]] = defaultdict(list)
    for test_id in test_ids:
        path, names = split_id(test_id)
        by_file[path].append(names)
    for path, wanted in by_file.items():
        file = root / path
        file.write_text(without(file.read_text(), wanted))


def without(source: str, wanted: list[list[str]]) -> str:
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    located = []
    for names in wanted:
        found = find(tree, names)
        if found is None:
            raise ValueError(f"no test {'::'.join(names)}")
        located.append(found)
    removed = {id(node) for node, _ in located}
    spans = set()
    for node, block in located:
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        left = [n for n in block if id(n) not in removed and not isinstance(n, ast.Pass)]
        filler = " " * node.col_offset + "pass\n" if not left and block is not tree.body else ""
        spans.add((start, node.end_lineno or node.lineno, filler))
    for start, end, filler in sorted(spans, reverse=True):
        lines[start - 1:end] = [filler] if filler else []
    text = "".join(lines)
    ast.parse(text)
    return text
