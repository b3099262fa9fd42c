"""Reversible bug modifiers, for training pairs only: each flips a comparison, an arithmetic
or boolean operator, inverts an ``if``'s or ``while``'s condition, or moves an integer
constant by one, within one line, so one local edit undoes it.

Never a task instance: a model-free search over single edits fixes most of them (see
:mod:`.mutants`, whose irreversible kinds make every split). The pair maker of the GPU
experiment takes them too, where the training libraries' irreversible mutants give too few
(buggy function, fixed function) pairs. A mutant is a one-line splice, the flipped
operator's or constant's text replaced (or ``not`` put before a condition) and the rest of
the line as it was, so the formatting does not tell where the bug is.
"""

import ast
import re
from collections.abc import Iterator

from .mutants import Mutant, first_line, functions

KINDS = ("flip_compare", "flip_operator", "flip_boolean", "invert_condition",
         "shift_constant")

COMPARE_FLIPS = {ast.Eq: "!=", ast.NotEq: "==", ast.Lt: ">=", ast.GtE: "<", ast.Gt: "<=",
                 ast.LtE: ">", ast.In: "not in", ast.NotIn: "in", ast.Is: "is not",
                 ast.IsNot: "is"}
COMPARE_TEXT = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.GtE: ">=", ast.Gt: ">",
                ast.LtE: "<=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is",
                ast.IsNot: "is not"}
OPERATOR_FLIPS = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "//"),
                  ast.FloorDiv: ("//", "*"), ast.Div: ("/", "*")}


def span(node: ast.AST) -> tuple[int, int, int] | None:
    """(line, first byte, byte past the end) of a node on one line, else None."""
    line, end_line = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    start, end = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if line is None or line != end_line or start is None or end is None:
        return None
    return line, start, end


def between(lines: list[bytes], left: ast.AST, right: ast.AST, old: str,
            new: str) -> tuple[int, bytes] | None:
    """The line with ``old`` replaced by ``new`` in the text between two nodes on it (where
    an operator is written), or None."""
    first, second = span(left), span(right)
    if first is None or second is None or first[0] != second[0]:
        return None
    line = lines[first[0] - 1]
    gap = line[first[2]:second[1]].decode()
    pattern = rf"\b{re.escape(old)}\b" if old[0].isalpha() else re.escape(old)
    if len(re.findall(pattern, gap)) != 1:
        return None
    changed = re.sub(pattern, new, gap)
    return first[0], line[:first[2]] + changed.encode() + line[second[1]:]


def flipped(node: ast.AST, lines: list[bytes]) -> tuple[str, int, bytes] | None:
    """(kind, line number, the line with the node flipped), or None where the node is none
    of the kinds; only the operator's or constant's text changes."""
    found: tuple[int, bytes] | None = None
    kind = ""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 \
            and type(node.ops[0]) in COMPARE_FLIPS:
        kind, op = "flip_compare", type(node.ops[0])
        found = between(lines, node.left, node.comparators[0], COMPARE_TEXT[op],
                        COMPARE_FLIPS[op])
    elif isinstance(node, ast.BinOp) and type(node.op) in OPERATOR_FLIPS \
            and not isinstance(node.left, ast.Constant | ast.JoinedStr):  # not "%s" % x
        kind, (old, new) = "flip_operator", OPERATOR_FLIPS[type(node.op)]
        found = between(lines, node.left, node.right, old, new)
    elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
        kind = "flip_boolean"
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        found = between(lines, node.values[0], node.values[1], old, new)
    elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value < 1000:
        where = span(node)
        if where is not None:
            kind, (line_no, start, end) = "shift_constant", where
            line = lines[line_no - 1]
            found = line_no, line[:start] + str(node.value + 1).encode() + line[end:]
    if found is None:
        return None
    return kind, *found


def inverted(test: ast.expr, lines: list[bytes]) -> tuple[int, bytes] | None:
    """The line of an ``if``'s or ``while``'s test with ``not`` before it, or None."""
    where = span(test)
    if where is None:
        return None
    line_no, start, end = where
    line, text = lines[line_no - 1], lines[line_no - 1][start:end]
    simple = isinstance(test, ast.Name | ast.Attribute | ast.Call | ast.Subscript)
    return line_no, line[:start] + (b"not " + text if simple else b"not (" + text + b")") \
        + line[end:]


def function_mutants(function: ast.stmt, name: str, lines: list[bytes]) -> Iterator[Mutant]:
    where = {"function": name, "function_start": first_line(function),
             "function_end": function.end_lineno or function.lineno}
    docstring = ast.get_docstring(function, clean=False) is not None  # type: ignore[arg-type]
    body = function.body[1:] if docstring else function.body  # type: ignore[attr-defined]
    for node in (n for statement in body for n in ast.walk(statement)):
        found = flipped(node, lines)
        if found is not None:
            kind, line_no, line = found
            yield Mutant(kind=kind, start=line_no, end=line_no, replacement=line.decode(),
                         **where)
        if isinstance(node, ast.If | ast.While):
            test = inverted(node.test, lines)
            if test is not None:
                yield Mutant(kind="invert_condition", start=test[0], end=test[0],
                             replacement=test[1].decode(), **where)


def flips(source: str) -> list[Mutant]:
    """Every reversible mutant of one file, in file order (each leaves a file that parses:
    an operator, a constant or ``not (...)`` stands where one stood)."""
    lines = [line.encode() for line in source.splitlines(keepends=True)]
    found = [mutant for name, function, _ in functions(ast.parse(source))
             for mutant in function_mutants(function, name, lines)]
    return sorted(found, key=lambda m: (m.start, m.kind))
