"""The harness's calculator: integer arithmetic with + - * and parentheses, nothing else.

The expression comes from the model, so it is untrusted text. It is never passed to
``eval``: it must consist of digits, the three operators, parentheses and spaces, be at
most ``MAX_CHARS`` long, and parse into a tree of integer literals, + - * and unary signs;
every literal and every intermediate result is bounded in size, so no input can make the
calculator run long or use much memory.
"""

import ast
import operator
import re

MAX_CHARS = 64
MAX_DIGITS = 12
MAX_ABS = 10**15
ALLOWED = re.compile(r"[0-9+\-*() ]+")
BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalcError(ValueError):
    """The expression is not one the calculator accepts."""


def evaluate(expression: str) -> int:
    """The value of ``expression``, or CalcError naming why it was refused."""
    text = expression.strip()
    if not text or len(text) > MAX_CHARS:
        raise CalcError(f"expression must be 1 to {MAX_CHARS} characters")
    if not ALLOWED.fullmatch(text):
        raise CalcError("only integers, + - * and parentheses are allowed")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CalcError("not a valid expression") from None
    return _value(tree.body)


def _value(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        if len(str(abs(node.value))) > MAX_DIGITS:
            raise CalcError(f"numbers may have at most {MAX_DIGITS} digits")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        return _bounded(BINARY[type(node.op)](_value(node.left), _value(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return _bounded(UNARY[type(node.op)](_value(node.operand)))
    raise CalcError(f"{type(node).__name__} is not allowed")


def _bounded(value: int) -> int:
    if abs(value) > MAX_ABS:
        raise CalcError(f"results must stay within {MAX_ABS:.0e} in size")
    return value
