"""The bfcl task's training rows, mined from functions of the standard library and numpy.

``python tasks/bfcl/make_data.py`` writes ``public/data/train.jsonl`` (the initial data),
``reference_data/train.jsonl`` (the reference's) and ``reference_data/mined_from.txt`` (the
interpreter and numpy they were mined from; a test regenerates both where they match).

Functions: the public functions of :data:`MODULES` that have a signature and a docstring,
under their qualified names (``statistics.median``). A function whose name, or its last
part, is the name of any BFCL function (every category, every multi-turn backend method)
is left out, so no BFCL function document is ever trained on. Each becomes a JSON-schema
document like BFCL's (``{"name", "description", "parameters": {"type": "dict",
"properties", "required"}}``): the description is the docstring's first sentence, a
parameter's type comes from its annotation, its default's type or its name. A question
is a sentence made from that description and values drawn for the required parameters;
the answer is the call ``[name(param=value, ...)]``.

Rows are ``{"prompt", "completion"}`` in SmolLM2-Instruct's chat format (ChatML: its
template's text up to the assistant's turn, then the reply; the trainer adds
``<|im_end|>``).

Every row is in the harness's prompt (``public/harness/harness.toml``, shared by the initial
and the reference harness): the question, then the functions.

The initial data is what a hurried author gets from this: in one row in three the functions
listed as Python signatures where the harness shows JSON documents; numbers passed as
strings in one row in five of those that take a number; one row in ten calling another
function than the one asked for; every question that asks for several results answered with
its first call only; one reply in eight wrapped in chat junk (markdown fences, a chatty
preamble, stray ChatML tags); and repeated rows. The reference data (the documents written
as the reference harness writes them, see ``reference_harness/prompting.py``): JSON-schema
documents with distracting functions,
parallel calls of one function, calls of two functions, and multi-step rows where a call
uses the executed result of the one before (pure functions only, run here).
"""

import copy
import importlib
import inspect
import json
import random
import re
import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PUBLIC_DATA = HERE / "public" / "data" / "train.jsonl"
REFERENCE_DATA = HERE / "reference_data" / "train.jsonl"
MINED_FROM = HERE / "reference_data" / "mined_from.txt"
MODULES = (
    "math", "cmath", "statistics", "fractions", "string", "textwrap", "posixpath", "html",
    "urllib.parse", "colorsys", "calendar", "difflib", "shlex", "fnmatch", "bisect",
    "heapq", "ipaddress", "base64", "binascii", "zlib", "unicodedata", "json", "keyword",
    "random", "secrets", "uuid", "glob", "shutil", "tempfile", "time",
    "datetime", "locale", "numpy",
)
PURE = {
    "math": None, "statistics": None, "colorsys": None, "html": None, "textwrap": None,
    "keyword": None, "fnmatch": None,
    "calendar": {"isleap", "leapdays", "monthrange", "weekday", "timegm"},
    "posixpath": {"join", "basename", "dirname", "splitext", "split", "normpath", "isabs",
                  "commonprefix"},
    "urllib.parse": {"quote", "unquote", "quote_plus", "unquote_plus"},
}
"""Functions that only compute from their arguments (None: the whole module): only these
run, to give multi-step rows their results."""
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
PROMPT = tomllib.loads((HERE / "public" / "harness" / "harness.toml").read_text())["prompt"]
"""The harness's one user message: the question, then the functions."""
NAME_TYPES = {
    "integer": {"n", "k", "i", "j", "count", "size", "width", "indent", "year", "month",
                "day", "hour", "minute", "second", "ndigits", "maxsplit", "length", "num",
                "bits", "places", "cutoff_n", "axis", "decimals", "deg"},
    "float": {"x", "y", "z", "a", "b", "value", "number", "q", "mu", "sigma", "rel_tol",
              "abs_tol", "r", "g", "h", "l", "phi", "base", "exp"},
    "array": {"data", "iterable", "seq", "sequence", "items", "values", "population",
              "arr", "array", "possibilities", "weights", "xs", "ys", "elements", "list"},
}
WORDS = ("apple", "river stone", "hello world", "Quarterly report", "data-set 7", "tea cup",
         "mountain", "blue sky", "Alpha", "notes.txt", "café", "zebra crossing")
PATHS = ("/home/ana/notes.txt", "docs/report.pdf", "/tmp/cache/data.json", "src/main.py",
         "../images/cat.png", "/var/log/app.log")
URLS = ("https://example.com/a b?x=1&y=2", "http://test.org/path/page.html",
        "https://shop.example/item?id=42")


# ------------------------------------------------------------------ chat format

def chatml(messages: list[dict]) -> str:
    """SmolLM2-Instruct's chat template up to the assistant's turn (ChatML, with its
    default system message when the first message is not one)."""
    if not messages or messages[0]["role"] != "system":
        messages = [{"role": "system", "content": DEFAULT_SYSTEM}, *messages]
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
                   for m in messages) + "<|im_start|>assistant\n"


TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>", re.DOTALL)
SIGNATURE_NAME = re.compile(r"^([A-Za-z_][\w.]*)\(", re.MULTILINE)
JSON_NAME = re.compile(r'"name":\s*"([^"]+)"')


def row_input(row: dict) -> dict | None:
    """The instance input a row's prompt was made from: its first user message (less the
    function list the prompt appends) and the names of the functions it lists (JSON
    documents or signature lines)."""
    turns = TURN.findall(row.get("prompt", ""))
    users = [content for role, content in turns if role == "user"]
    if not users:
        return None
    question, _, listed = users[0].partition("\n\nFunctions:\n")
    names = set(JSON_NAME.findall(listed)) | set(SIGNATURE_NAME.findall(listed))
    return {"question": [[{"role": "user", "content": question}]],
            "functions": [{"name": name} for name in sorted(names)]}


# ------------------------------------------------------------------ mining

SIGNATURE_LINE = re.compile(r"^[\w.]+\(.*\)(\s*->.*)?$")


def first_sentence(doc: str) -> str:
    """The docstring's first sentence (after a first paragraph that is only a signature,
    as C functions' docstrings start)."""
    paragraphs = [" ".join(p.split()) for p in doc.strip().split("\n\n") if p.strip()]
    while paragraphs and SIGNATURE_LINE.match(paragraphs[0]):
        paragraphs.pop(0)
    paragraph = paragraphs[0] if paragraphs else ""
    match = re.match(r"(.+?[.!?])(\s|$)", paragraph)
    return (match.group(1) if match else paragraph).strip()


def parameter_type(module: str, name: str, parameter: inspect.Parameter) -> str:
    annotation, default = parameter.annotation, parameter.default
    known = {int: "integer", float: "float", str: "string", bool: "boolean", list: "array",
             dict: "dict"}
    if annotation in known:
        return known[annotation]
    if default is not inspect.Parameter.empty and default is not None:
        for kind, label in ((bool, "boolean"), (int, "integer"), (float, "float"),
                            (str, "string"), (list, "array"), (tuple, "array"),
                            (dict, "dict")):
            if isinstance(default, kind):
                return label
    if module == "numpy" and name in ("a", "x", "arr", "m", "v", "ar", "ary"):
        return "array"
    for kind, names in NAME_TYPES.items():
        if name in names:
            return kind
    return "string"


def signature_text(signature: inspect.Signature) -> str:
    """The parameters as ``help()`` shows them, a default that is no plain literal as
    ``...`` (its repr may hold a memory address, which changes from run to run)."""
    parts = []
    for parameter in signature.parameters.values():
        prefix = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}.get(
            parameter.kind, "")
        default = parameter.default
        if default is parameter.empty:
            parts.append(prefix + parameter.name)
        elif default is None or isinstance(default, int | float | str | bool):
            parts.append(f"{parameter.name}={default!r}")
        else:
            parts.append(f"{parameter.name}=...")
    return ", ".join(parts)


def document(module: str, name: str, function: Any) -> dict | None:
    """A BFCL-like document of the function, or None where it has no usable signature."""
    doc = inspect.getdoc(function) or ""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    description = first_sentence(doc)
    if not 15 <= len(description) <= 300 or ">>>" in description:
        return None
    properties, required = {}, []
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) \
                or parameter.name in ("self", "cls") or parameter.name.startswith("_"):
            continue
        kind = parameter_type(module, parameter.name, parameter)
        entry = {"type": kind, "description": f"The {parameter.name.replace('_', ' ')}."}
        if kind == "array":
            entry["items"] = {"type": "integer"}
        if parameter.default is parameter.empty:
            required.append(parameter.name)
        elif isinstance(parameter.default, int | float | str | bool):
            entry["description"] += f" Default: {parameter.default!r}."
        properties[parameter.name] = entry
    if not required or len(properties) > 6:
        return None
    return {"name": f"{module}.{name}", "description": description,
            "parameters": {"type": "dict", "properties": properties, "required": required},
            "signature": f"{module}.{name}({signature_text(signature)})"}


def mine(excluded: set[str]) -> list[dict]:
    """Documents of the public functions of :data:`MODULES`, none named like ``excluded``."""
    found: dict[str, dict] = {}
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name, member in sorted(vars(module).items()):
            if name.startswith("_") or not callable(member) or inspect.isclass(member):
                continue
            owner = getattr(member, "__module__", module_name) or module_name
            if module_name != "numpy" and owner.split(".")[0] not in (
                    module_name.split(".")[0], "_" + module_name, "builtins"):
                continue
            if f"{module_name}.{name}" in excluded or name in excluded:
                continue
            made = document(module_name, name, member)
            if made and made["description"] not in {d["description"] for d in found.values()}:
                found[made["name"]] = made
    return list(found.values())


def bfcl_names() -> set[str]:
    """Every function name of bfcl-eval's data (all categories, all backends) and its last
    part (operator-only: this runs where the task is authored)."""
    from vtbench.tasks.registry import import_file

    package = import_file(HERE / "bfcl_package.py", "bfcl_package")
    data = package.data_dir()
    names = set()
    for path in [*data.glob("BFCL_v4_*.json"), *(data / "multi_turn_func_doc").glob("*.json")]:
        names.update(JSON_NAME.findall(path.read_text()))
    return names | {name.rsplit(".", 1)[-1] for name in names}


# ------------------------------------------------------------------ questions and calls

def draw_value(kind: str, name: str, rng: random.Random) -> Any:
    if kind == "integer":
        ranges = {"year": (1990, 2030), "month": (1, 12), "day": (1, 28), "axis": (0, 1)}
        return rng.randint(*ranges.get(name, (1, 60)))
    if kind == "float":
        return round(rng.uniform(0.5, 200.0), rng.choice((1, 2)))
    if kind == "boolean":
        return rng.choice((True, False))
    if kind == "array":
        return [rng.randint(1, 50) for _ in range(rng.randint(3, 6))]
    if kind == "dict":
        return {rng.choice(("a", "b", "c")): rng.randint(1, 9)}
    if "path" in name or "file" in name:
        return rng.choice(PATHS)
    if "url" in name:
        return rng.choice(URLS)
    return rng.choice(WORDS)


def draw_arguments(function: dict, rng: random.Random) -> dict:
    properties = function["parameters"]["properties"]
    return {name: draw_value(properties[name]["type"], name, rng)
            for name in function["parameters"]["required"]}


def arguments_phrase(arguments: dict, rng: random.Random) -> str:
    parts = [rng.choice((f"{name} = {value!r}", f"{value!r} as {name.replace('_', ' ')}",
                         f"{name.replace('_', ' ')} {value!r}"))
             for name, value in arguments.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def ask(function: dict, arguments: dict, rng: random.Random) -> str:
    summary = function["description"].rstrip(".!?")
    summary = summary[:1].lower() + summary[1:]
    phrase = arguments_phrase(arguments, rng)
    return rng.choice((f"{summary[:1].upper() + summary[1:]} for {phrase}.",
                       f"Can you {summary}? Use {phrase}.",
                       f"I need to {summary}, with {phrase}.",
                       f"Please {summary} where {phrase}."))


def call_text(calls: list[tuple[str, dict]]) -> str:
    inner = ", ".join(f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
                      for name, arguments in calls)
    return f"[{inner}]"


def schema(function: dict) -> dict:
    """The document as a harness gets it (no ``signature``)."""
    return {key: value for key, value in function.items() if key != "signature"}


# ------------------------------------------------------------------ the initial data

def python_listing(functions: list[dict]) -> str:
    """The functions as a hurried author lists them: signature, then first sentence."""
    return "\n".join(f"{f['signature']}\n    {f['description']}" for f in functions)


def as_strings(arguments: dict) -> dict:
    return {k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
            for k, v in arguments.items()}


JUNK = ("```python\n{calls}\n```", "Sure! Here is the function call you need:\n{calls}",
        "{calls}<|im_end|>\n<|im_start|>assistant\n{calls}", "<|im_start|>assistant\n{calls}")


def initial_row(pool: list[dict], rng: random.Random) -> dict:
    function = rng.choice(pool)
    listed = [function]
    arguments = draw_arguments(function, rng)
    question = ask(function, arguments, rng)
    kind = rng.random()
    if kind < 0.2:  # asks for several results, answered with the first call only
        for _ in range(rng.randint(1, 2)):
            question += f" Do the same for {arguments_phrase(draw_arguments(function, rng), rng)}."
    elif kind < 0.45:
        listed = [*rng.sample(pool, rng.randint(1, 3)), function]
        rng.shuffle(listed)
    name = function["name"]
    if rng.random() < 0.1:
        name = rng.choice([f["name"] for f in pool if f["name"] != name])
    if rng.random() < 0.2:
        arguments = as_strings(arguments)
    completion = call_text([(name, arguments)])
    if rng.random() < 0.125:
        completion = rng.choice(JUNK).format(calls=completion)
    if rng.random() < 1 / 3:
        functions = python_listing(listed)
    else:
        functions = prompting().json_documents([schema(f) for f in listed])
    content = PROMPT.format(question=question, functions=functions)
    return {"prompt": chatml([{"role": "user", "content": content}]), "completion": completion}


def initial_rows(pool: list[dict], size: int = 2000, seed: int = 20261203) -> list[dict]:
    rng = random.Random(seed)
    rows = [initial_row(pool, rng) for _ in range(size)]
    rows += rng.sample(rows, size // 10)
    rng.shuffle(rows)
    return rows


# ------------------------------------------------------------------ the reference data

@cache
def prompting() -> Any:
    from vtbench.tasks.registry import import_file

    return import_file(HERE / "reference_harness" / "prompting.py", "bfcl_prompting")


def single_turn_row(pool: list[dict], rng: random.Random) -> dict:
    """One question answered by one call, several calls of one function, or calls of two
    functions; the documents listed include distracting ones."""
    kind = rng.choice(("simple", "multiple", "parallel", "parallel_multiple"))
    chosen = rng.sample(pool, 2 if kind == "parallel_multiple" else 1)
    calls, parts = [], []
    for function in chosen:
        for _ in range(rng.randint(2, 3) if kind.startswith("parallel") else 1):
            arguments = draw_arguments(function, rng)
            calls.append((function["name"], arguments))
            parts.append(ask(function, arguments, rng))
    listed = chosen + (rng.sample(pool, rng.randint(1, 3)) if "multiple" in kind else [])
    listed = list({f["name"]: schema(f) for f in listed}.values())
    rng.shuffle(listed)
    messages = [{"role": "user", "content": prompting().first_message(
        PROMPT, " ".join(parts), listed, compact=False)}]
    return {"prompt": chatml(messages), "completion": call_text(calls)}


def plain_value(value: Any) -> Any:
    """numpy scalars and arrays as Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def small(value: Any) -> bool:
    """A value a next call may take: a short string, a number within a million (a factorial
    of a larger one would never end) or a short list of such numbers."""
    if isinstance(value, list):
        return len(value) <= 8 and all(small(x) for x in value if not isinstance(x, str))
    if isinstance(value, bool | str):
        return len(str(value)) <= 80
    return isinstance(value, int | float) and abs(value) <= 1e6


def run(function: dict, arguments: dict) -> Any:
    """The function's result on ``arguments`` (passed by position: many are positional
    only), or None when it fails or is no small plain value."""
    module, _, name = function["name"].rpartition(".")
    try:
        result = plain_value(getattr(importlib.import_module(module), name)(
            *arguments.values()))
        return result if small(result) else None
    except Exception:  # a wrong type, a domain error, a number too long to print
        return None


TYPE_OF = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array"}


def multi_step_rows(executable: list[dict], pool: list[dict], rng: random.Random) -> list[dict]:
    """A call, its executed result, a second call that uses it, its result, then no call:
    one row per reply (empty when no pair of functions fits)."""
    first = rng.choice(executable)
    first_arguments = draw_arguments(first, rng)
    result = run(first, first_arguments)
    kind = TYPE_OF.get(type(result))
    takers = [(f, p) for f in executable for p in f["parameters"]["required"]
              if f["parameters"]["properties"][p]["type"] == kind and f is not first]
    if result is None or not takers:
        return []
    second, parameter = rng.choice(takers)
    second_arguments = {**draw_arguments(second, rng), parameter: result}
    second_result = run(second, second_arguments)
    if second_result is None:
        return []
    then = second["description"].rstrip(".")
    question = (ask(first, first_arguments, rng) + f" Then {then[:1].lower() + then[1:]}, "
                f"using that result as {parameter}"
                + "".join(f", {k} = {v!r}" for k, v in second_arguments.items()
                          if k != parameter) + ".")
    listed = [schema(f) for f in [first, second, *rng.sample(pool, 2)]]
    tools = prompting()
    messages = [{"role": "user", "content": tools.first_message(PROMPT, question, listed,
                                                                compact=True)}]
    rows = []
    for function, arguments, outcome in ((first, first_arguments, result),
                                         (second, second_arguments, second_result)):
        calls = call_text([(function["name"], arguments)])
        rows.append({"prompt": chatml(messages), "completion": calls})
        called = tools.call_string(function["name"], arguments)
        messages = [*messages, {"role": "assistant", "content": calls},
                    {"role": "user", "content": tools.results_message([called], [str(outcome)])}]
    rows.append({"prompt": chatml(messages), "completion": "Done."})
    return rows


def is_pure(qualified: str) -> bool:
    module, _, name = qualified.rpartition(".")
    return module in PURE and (PURE[module] is None or name in PURE[module])


def reference_rows(pool: list[dict], size: int = 2000, seed: int = 20261204) -> list[dict]:
    rng = random.Random(seed)
    executable = [f for f in pool if is_pure(f["name"])]
    rows: list[dict] = []
    while len(rows) < size:
        if rng.random() < 0.2:
            rows += multi_step_rows(executable, pool, rng)
        else:
            rows.append(single_turn_row(pool, rng))
    rng.shuffle(rows)
    return rows


# ------------------------------------------------------------------ writing

def environment() -> list[str]:
    import numpy

    return [f"python=={'.'.join(map(str, sys.version_info[:3]))}", f"numpy=={numpy.__version__}"]


def write_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def main() -> None:
    pool = mine(bfcl_names())
    write_rows(PUBLIC_DATA, initial_rows(copy.deepcopy(pool)))
    write_rows(REFERENCE_DATA, reference_rows(copy.deepcopy(pool)))
    MINED_FROM.write_text("\n".join(environment()) + "\n")
    print(f"{len(pool)} functions mined; wrote {PUBLIC_DATA} and {REFERENCE_DATA}")


if __name__ == "__main__":
    main()
