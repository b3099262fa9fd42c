"""Prompts, parsing and repair of calls for the bfcl reference harness.

Prompt: the harness's own template (``prompt`` in harness.toml, the initial harness's: the
question, then the function documents as JSON), so a model trained on rows in that format
is prompted as it was trained, whichever harness asks it. Documents go in without BFCL's
Python-syntax hint; where they would not fit the model's context (a multi-turn entry's two
backends take up to 8,000 tokens as JSON), as one signature line per function
(:func:`signature_lines`).

Repair: every parsed call is checked against the documents (:func:`repair`): an unknown
function name becomes the closest documented one, unknown parameters are dropped,
values are coerced to the declared type where that loses nothing (``"5"`` to 5, 5 to
5.0, a lone value to a one-element list, ``"true"`` to True), and a call that still lacks
a required parameter is reported as invalid.
"""

import ast
import difflib
import json

HINT = " Note that the provided function is in Python 3 syntax."
TYPES = {"string": str, "integer": int, "float": float, "number": float, "boolean": bool,
         "array": list, "tuple": list, "dict": dict, "object": dict}


def plain(functions: list[dict]) -> list[dict]:
    """The documents without BFCL's hint (it costs tokens and says nothing per function)."""
    return [{**f, "description": f.get("description", "").removesuffix(HINT)}
            for f in functions]


def json_documents(functions: list[dict]) -> str:
    """The documents as the initial harness writes them (``json.dumps``), less the hint."""
    return json.dumps(plain(functions))


def type_name(schema: dict) -> str:
    kind = schema.get("type", "any")
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array[{type_name(schema['items'])}]"
    if "enum" in schema:
        return f"{kind} one of {schema['enum']}"
    return kind


def signature_lines(functions: list[dict]) -> str:
    """``name(param: type, optional: type = default) -- description`` per function."""
    lines = []
    for function in plain(functions):
        parameters = function.get("parameters", {})
        required = set(parameters.get("required", []))
        parts = []
        for name, schema in parameters.get("properties", {}).items():
            part = f"{name}: {type_name(schema)}"
            if name not in required:
                part += f" = {schema.get('default', None)!r}"
            parts.append(part)
        lines.append(f"{function['name']}({', '.join(parts)}) -- {function['description']}")
    return "\n".join(lines)


def first_message(template: str, question: str, functions: list[dict], compact: bool) -> str:
    """The question in ``template`` with the documents: JSON, or signature lines (compact)."""
    listing = signature_lines(functions) if compact else json_documents(functions)
    return template.format(question=question, functions=listing)


def results_message(calls: list[str], results: list[str]) -> str:
    """What the model is told after its calls ran: one line per call and its result."""
    return "Results:\n" + "\n".join(f"{call} -> {result}"
                                    for call, result in zip(calls, results, strict=True))


# ------------------------------------------------------------------ reading replies

def literal(node: ast.expr) -> object:
    """A literal value; a bare name is read as its text (models write ``unit=km``)."""
    if isinstance(node, ast.Name):
        return node.id
    return ast.literal_eval(node)


def parse_calls(text: str) -> list[tuple[str, dict]] | None:
    """The calls of a reply (``[f(a=1), g(b='x')]``, fenced or not); None if it holds none."""
    text = text.replace("```python", "").replace("```", "").strip()
    start, end = text.find("["), text.rfind("]")
    for source in ([text[start:end + 1]] if 0 <= start < end else []) + [text]:
        try:
            tree = ast.parse(source.strip(), mode="eval").body
            nodes = tree.elts if isinstance(tree, ast.List | ast.Tuple) else [tree]
            if not nodes or not all(isinstance(n, ast.Call) for n in nodes):
                continue
            return [(ast.unparse(n.func), {k.arg: literal(k.value) for k in n.keywords if k.arg})
                    for n in nodes if isinstance(n, ast.Call)]
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
    return None


def coerce(value: object, schema: dict) -> tuple[object, bool]:
    """``value`` as the schema's type where that loses nothing, and whether it now fits."""
    kind = TYPES.get(schema.get("type", ""))
    if kind is None:
        return value, True
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value), True
    if isinstance(value, str) and kind in (int, float):
        try:
            number = kind(value)
            return number, True
        except ValueError:
            return value, False
    if isinstance(value, str) and kind is bool and value.lower() in ("true", "false"):
        return value.lower() == "true", True
    if kind is list and not isinstance(value, list | tuple):
        return [value], True
    if kind is list:
        items = schema.get("items") or {}
        coerced = [coerce(item, items) for item in value]
        return [item for item, _ in coerced], all(ok for _, ok in coerced)
    fits = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    return value, fits


def repair(name: str, arguments: dict, functions: list[dict]) -> tuple[str, dict, bool]:
    """The call fitted to the documents, and whether it is valid."""
    documents = {f["name"]: f for f in functions}
    if name not in documents:
        close = difflib.get_close_matches(name, list(documents), n=1, cutoff=0.6)
        if not close:
            return name, arguments, False
        name = close[0]
    parameters = documents[name].get("parameters", {})
    properties = parameters.get("properties", {})
    fixed, valid = {}, True
    for key, value in arguments.items():
        if key in properties:
            fixed[key], fits = coerce(value, properties[key])
            valid = valid and fits
    valid = valid and all(key in fixed for key in parameters.get("required", []))
    return name, fixed, valid


def call_string(name: str, arguments: dict) -> str:
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"
