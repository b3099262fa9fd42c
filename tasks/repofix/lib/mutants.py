"""Irreversible bug modifiers: each removes code, so no local edit of what is left undoes it.

Written on the standard library's ``ast`` (swesmith's libcst modifiers would bring libcst
and a package that wants GitHub and Docker for the rest; these six are the irreversible
kinds it names). A mutant is a line splice of the original file: the lines of one
statement are deleted, or a wrapper's lines are replaced by its body moved left, so the
rest of the file keeps its formatting and comments and nothing but the bug tells where
it is. The reversible kinds (operator flips, inverted conditions, constants ± 1) are left
out: a model-free search over single edits fixes most of them.
"""

import ast
from collections.abc import Iterator
from dataclasses import dataclass

KINDS = ("remove_assign", "remove_call", "remove_cond", "remove_loop", "remove_wrapper",
         "remove_method")


@dataclass(frozen=True)
class Mutant:
    kind: str
    function: str
    """Qualified name of the top-level function or method the bug is in."""
    function_start: int
    """First line (1-based) of that function, decorators included."""
    function_end: int
    start: int
    """First line (1-based) of the splice."""
    end: int
    """Last line of the splice."""
    replacement: str

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        return "".join(lines[:self.start - 1]) + self.replacement + "".join(lines[self.end:])


def first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def owns_its_lines(node: ast.stmt, lines: list[str]) -> bool:
    """Whether the statement alone fills its lines (no ``a = 1; b = 2``)."""
    head = lines[first_line(node) - 1]
    tail = lines[(node.end_lineno or node.lineno) - 1]
    before = head[:node.col_offset] if node.lineno == first_line(node) else ""
    after = tail[node.end_col_offset or 0:].strip()
    return not before.strip() and (not after or after.startswith("#"))


def kind_of(node: ast.stmt, in_class: bool) -> str | None:
    if in_class:
        return "remove_method" if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) \
            else None
    if isinstance(node, ast.Assign | ast.AugAssign) or (
            isinstance(node, ast.AnnAssign) and node.value is not None):
        return "remove_assign"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return "remove_call"
    if isinstance(node, ast.If):
        return "remove_cond"
    if isinstance(node, ast.For | ast.While | ast.AsyncFor):
        return "remove_loop"
    if isinstance(node, ast.With | ast.Try):
        return "remove_wrapper"
    return None


def blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(node, "handlers", []):
        yield handler.body


def unwrapped(node: ast.With | ast.Try, lines: list[str]) -> str | None:
    """The wrapper's body moved to the wrapper's indentation; None where a line of it is
    not indented as its first (a multi-line string would change)."""
    body_lines = lines[node.body[0].lineno - 1:node.body[-1].end_lineno]
    shift = node.body[0].col_offset - node.col_offset
    prefix = lines[node.body[0].lineno - 1][:shift]
    if prefix.strip() != "" or any(line.strip() and not line.startswith(prefix)
                                       for line in body_lines):
        return None
    return "".join(line[shift:] if line.strip() else line for line in body_lines)


def statement_mutants(function: ast.stmt, name: str, lines: list[str]) -> Iterator[Mutant]:
    span = {"function": name, "function_start": first_line(function),
            "function_end": function.end_lineno or function.lineno}
    for node in ast.walk(function):
        for block in blocks(node):
            if len(block) < 2:
                continue
            for statement in block:
                kind = kind_of(statement, in_class=False)
                if kind is None or not owns_its_lines(statement, lines):
                    continue
                start, end = first_line(statement), statement.end_lineno or statement.lineno
                replacement = ""
                if kind == "remove_wrapper":
                    moved = unwrapped(statement, lines)  # type: ignore[arg-type]
                    if moved is None:
                        continue
                    replacement = moved
                yield Mutant(kind=kind, start=start, end=end, replacement=replacement, **span)


def functions(tree: ast.Module) -> Iterator[tuple[str, ast.stmt, ast.ClassDef | None]]:
    """Top-level functions and the methods of top-level classes, with their class."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node, None
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}.{member.name}", member, node


def mutants(source: str) -> list[Mutant]:
    """Every mutant of one file, in file order."""
    lines = source.splitlines(keepends=True)
    found: list[Mutant] = []
    for name, function, owner in functions(ast.parse(source)):
        found += statement_mutants(function, name, lines)
        methods = [m for m in (owner.body if owner else [])
                   if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
        if owner is not None and len(owner.body) > 1 and owns_its_lines(function, lines) \
                and len(methods) > 1 and not function.name.startswith("__"):
            end = function.end_lineno or function.lineno
            found.append(Mutant(kind="remove_method", function=name,
                                function_start=first_line(function), function_end=end,
                                start=first_line(function), end=end, replacement=""))
    return found
