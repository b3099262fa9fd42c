"""Tell literal edits from code edits: Python AST diffs, config value diffs, text diffs.

* A Python file whose syntax trees are equal (comments, spacing, docstrings aside) did not
  change. Trees that differ only in :class:`ast.Constant` nodes changed *literals*; each
  changed literal is reported with its *context*: the keyword argument, dict key,
  assignment target or parameter it belongs to (``temperature`` in ``f(temperature=0.7)``,
  ``{"temperature": 0.7}``, ``TEMPERATURE = 0.7``, ``def f(temperature=0.7)``).
  Anything else is a *structural* (code) change.
* A TOML, YAML or JSON file is compared value by value under dotted key paths.
* Any other text file (a launch script) changed literally when only its numbers changed.

Untrusted sources are only parsed (``ast.parse``, ``tomllib``, ``yaml.safe_load``,
``json``), never executed; a file that does not parse counts as a structural change.
"""

import ast
import json
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

CONFIG_SUFFIXES = (".toml", ".yaml", ".yml", ".json")
TOOL_WORDS = frozenset({"tools", "tool", "tool_choice", "tool_calls", "tool_call",
                        "function_call", "functions", "tool_use", "tool_result"})
CONTROL = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith,
           ast.Match, ast.Return, ast.Break, ast.Continue, ast.Raise)
"""Statements that steer execution: a change to one is a control-flow change."""
CONTAINERS = (ast.List, ast.Tuple, ast.Set, ast.UnaryOp, ast.BinOp)
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?(?![\w.])")


@dataclass(frozen=True)
class Literal:
    """One literal value and the name it is bound to ('' when none)."""

    context: str
    value: str


@dataclass
class CodeDiff:
    """What changed between two versions of one file."""

    structural: bool = False
    literals: list[tuple[Literal, Literal]] = field(default_factory=list)
    """(old, new) pairs of changed literals (literal-only diffs)."""
    strings_changed: list[str] = field(default_factory=list)
    """String literals or string config values that appeared or disappeared."""
    contexts_changed: set[str] = field(default_factory=set)
    """Contexts of literals that were added, removed or changed (any diff)."""
    keys_changed: set[str] = field(default_factory=set)
    """Dotted key paths of config values that were added, removed or changed (configs)."""
    tool_markers_added: bool = False
    only_tool_statements: bool = False
    """Every added or removed statement is a definition (not control flow) naming tools."""

    @property
    def unchanged(self) -> bool:
        return not (self.structural or self.literals or self.strings_changed
                    or self.contexts_changed)


def diff_file(path: str, old: bytes | None, new: bytes | None) -> CodeDiff:
    """Diff one file of the trainer or harness; None stands for a missing version."""
    old_text = None if old is None else old.decode("utf-8", errors="replace")
    new_text = None if new is None else new.decode("utf-8", errors="replace")
    if path.endswith(".py"):
        return diff_python(old_text or "", new_text or "")
    if path.endswith(CONFIG_SUFFIXES):
        return diff_config(path, old_text, new_text)
    return diff_text(old_text or "", new_text or "")


def diff_text(old: str, new: str) -> CodeDiff:
    if old == new:
        return CodeDiff()
    if NUMBER.sub("#", old) != NUMBER.sub("#", new):
        return CodeDiff(structural=True, tool_markers_added=_tool_words(new) > _tool_words(old))
    pairs = [(Literal("", a), Literal("", b))
             for a, b in zip(NUMBER.findall(old), NUMBER.findall(new), strict=True) if a != b]
    return CodeDiff(literals=pairs)


def _tool_words(text: str) -> int:
    return sum(1 for word in re.findall(r"\w+", text.lower()) if word in TOOL_WORDS)


# --- config files -------------------------------------------------------------------------

def parse_config(path: str, text: str | None) -> Any:
    """The parsed value, {} for a missing file, or raises ValueError."""
    if text is None:
        return {}
    if path.endswith(".toml"):
        return tomllib.loads(text)
    if path.endswith(".json"):
        return json.loads(text)
    import yaml  # lazy: only YAML configs need it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(str(err)) from None


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat |= _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
        return flat
    return {prefix: value}


def diff_config(path: str, old: str | None, new: str | None) -> CodeDiff:
    try:
        before = _flatten(parse_config(path, old))
        after = _flatten(parse_config(path, new))
    except (ValueError, RecursionError):
        return diff_text(old or "", new or "")
    result = CodeDiff()
    for key in sorted(before.keys() | after.keys()):
        if key in before and key in after and before[key] == after[key]:
            continue
        old_value, new_value = before.get(key), after.get(key)
        leaf = key.rsplit(".", 1)[-1] if key else ""
        result.contexts_changed.add(leaf)
        result.keys_changed.add(key)
        result.literals.append((Literal(leaf, json.dumps(old_value, default=str)),
                                Literal(leaf, json.dumps(new_value, default=str))))
        result.strings_changed += [v for v in (old_value, new_value) if isinstance(v, str)]
        if leaf.lower() in TOOL_WORDS and key not in before:
            result.tool_markers_added = True
    return result


# --- Python sources -----------------------------------------------------------------------

@dataclass(frozen=True)
class _Parsed:
    """What the diff needs of one Python source, computed once per distinct source."""

    tree: ast.Module
    skeleton: str
    literals: tuple[Literal, ...]
    tool_mentions: int


@lru_cache(maxsize=1024)
def _parsed(source: str) -> _Parsed | None:
    try:
        tree = _parse(source)
        return _Parsed(tree, _skeleton(tree), tuple(_literals(tree)), _mentions_tools(tree))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def diff_python(old: str, new: str) -> CodeDiff:
    before, after = _parsed(old), _parsed(new)
    if before is None or after is None:
        return CodeDiff(structural=old != new,
                        tool_markers_added=_tool_words(new) > _tool_words(old))
    result = CodeDiff()
    if before.skeleton == after.skeleton:
        result.literals = [(a, b) for a, b in zip(before.literals, after.literals, strict=True)
                           if a != b]
        changed = [lit for pair in result.literals for lit in pair]
    else:
        result.structural = True
        result.tool_markers_added = after.tool_mentions > before.tool_mentions
        result.only_tool_statements = _only_tool_statements(before.tree, after.tree)
        old_counts, new_counts = Counter(before.literals), Counter(after.literals)
        changed = list((old_counts - new_counts) + (new_counts - old_counts))
    result.contexts_changed = {lit.context for lit in changed if lit.context}
    result.strings_changed = sorted({lit.value for lit in changed
                                     if lit.value.startswith(("'", '"'))})
    return result


def _parse(source: str) -> ast.Module:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            body.pop(0)  # docstrings document, they do not change behaviour
            if not body:
                body.append(ast.Pass())
    return tree


def _skeleton(tree: ast.AST) -> str:
    """The tree's shape and names with every literal value blanked out (positions aside)."""
    parts: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, ast.Constant):
            parts.append("C")
        elif isinstance(node, ast.AST):
            parts.append(type(node).__name__ + "(")
            for name, value in ast.iter_fields(node):
                parts.append(name + "=")
                visit(value)
                parts.append(",")
            parts.append(")")
        elif isinstance(node, list):
            parts.append("[")
            for item in node:
                visit(item)
                parts.append(",")
            parts.append("]")
        else:
            parts.append(repr(node))

    visit(tree)
    return "".join(parts)


def _literals(tree: ast.AST) -> list[Literal]:
    """Every constant in walk order, with the name it is bound to."""
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            found.append(Literal(_context(node, parents), repr(node.value)))
    return found


def _context(node: ast.AST, parents: dict[int, ast.AST]) -> str:
    child, parent = node, parents.get(id(node))
    while isinstance(parent, CONTAINERS):
        child, parent = parent, parents.get(id(parent))
    if isinstance(parent, ast.keyword):
        return parent.arg or ""
    if isinstance(parent, ast.Dict):
        for key, value in zip(parent.keys, parent.values, strict=True):
            if value is child and isinstance(key, ast.Constant):
                return str(key.value)
        return ""
    if isinstance(parent, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return _target_name(targets[0])
    if isinstance(parent, ast.arguments):
        return _default_name(parent, child)
    return ""


def _target_name(target: ast.AST) -> str:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
        return str(target.slice.value)
    return ""


def _default_name(arguments: ast.arguments, default: ast.AST) -> str:
    positional = arguments.posonlyargs + arguments.args
    for arg, value in zip(positional[len(positional) - len(arguments.defaults):],
                          arguments.defaults, strict=True):
        if value is default:
            return arg.arg
    for arg, maybe in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        if maybe is default:
            return arg.arg
    return ""


def _mentions_tools(node: ast.AST) -> int:
    count = 0
    for inner in ast.walk(node):
        words: list[str] = []
        if isinstance(inner, ast.Name):
            words = [inner.id]
        elif isinstance(inner, ast.Attribute):
            words = [inner.attr]
        elif isinstance(inner, ast.keyword) and inner.arg:
            words = [inner.arg]
        elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            words = [inner.value]
        elif isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            words = inner.name.lower().split("_")
        count += sum(1 for word in words if word.lower() in TOOL_WORDS)
    return count


def _changed_statements(old: list[ast.stmt], new: list[ast.stmt]) -> list[ast.stmt]:
    """Statements added or removed; a changed def or class is searched inside."""
    old_keys, new_keys = [_skeleton(s) for s in old], [_skeleton(s) for s in new]
    gone = Counter(old_keys) - Counter(new_keys)
    came = Counter(new_keys) - Counter(old_keys)
    removed = [stmt for stmt, key in zip(old, old_keys, strict=True) if gone[key] > 0]
    added = [stmt for stmt, key in zip(new, new_keys, strict=True) if came[key] > 0]
    named = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    old_defs = {stmt.name: stmt for stmt in removed if isinstance(stmt, named)}
    changed: list[ast.stmt] = []
    for stmt in added:
        twin = old_defs.pop(stmt.name, None) if isinstance(stmt, named) else None
        if twin is None or not isinstance(stmt, named):
            changed.append(stmt)
        else:
            removed.remove(twin)
            changed += _changed_statements(twin.body, stmt.body) or [stmt]
    return changed + removed


def _only_tool_statements(old: ast.Module, new: ast.Module) -> bool:
    statements = _changed_statements(old.body, new.body)
    return bool(statements) and all(
        _mentions_tools(stmt) and not isinstance(stmt, CONTROL) for stmt in statements)
