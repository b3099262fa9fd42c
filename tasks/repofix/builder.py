"""repofix: repair a Python library from an issue (trusted task code).

An instance is a pinned PyPI library with one bug that a modifier made by removing code
(``lib/mutants.py``), kept when 1-5 tests of its suite fail (``lib/instances.py``). The
harness gets the issue text (from those tests' structured results) and, in its sandbox,
the library's tree with the bug and without the failing tests (:func:`instance_workspace`);
it answers with a unified diff, which the scorer applies to a fresh tree with every test
restored. Libraries are split by role (``libraries/libraries.toml``): instances of the
training libraries make the public data, val and test draw from their own libraries only,
so no library's code is both trained on and evaluated. The installation secret orders each
split's draw.
"""

import random
from pathlib import Path

from vtbench.tasks.fingerprints import is_specific


def _lib():
    import importlib.util

    path = Path(__file__).resolve().parent / "lib" / "__init__.py"
    spec = importlib.util.spec_from_file_location("repofix_lib_loader", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load()


def _module(name: str):
    import importlib

    return importlib.import_module(f"{_lib().__name__}.{name}")


def pool(role: str, names: list[str] | None = None) -> list[dict]:
    """Every generated instance of the role's libraries (or of those named), generated
    once, then cached."""
    instances, libraries = _module("instances"), _module("libraries")
    found = [row for lib in libraries.libraries(role) if names is None or lib.name in names
             for row in instances.cached(lib)]
    return sorted(found, key=lambda row: row["key"])


def instance_input(row: dict) -> dict:
    return {"issue": row["issue"], "repository": row["release"]}


def normalize(instance_input: dict) -> str:
    return instance_input["repository"] + "\n" + instance_input["issue"]


def row_input(row: dict) -> None:
    """Public rows come from the training libraries only: none is a split's input."""
    return None


def same_bug(row: dict) -> str:
    """A bug by its text: the function and the edit that broke it. A library may hold the
    same function twice (boltons has two identical ``__get__``); the same edit of both is one
    bug, though its failing tests, and so its issue, differ."""
    return "\n".join((row["function_source"], row["removed"], row["replacement"]))


def build_split(rng: random.Random, size: int, exclude: set[str], split: str) -> list[dict]:
    rows = pool(split)
    rng.shuffle(rows)
    items = []
    for row in rows:
        keys = {normalize(instance_input(row)), same_bug(row)}
        if keys & exclude:
            continue
        exclude |= keys
        items.append({"input": instance_input(row), "label": row})
        if len(items) == size:
            return items
    raise RuntimeError(f"repofix: the {split} libraries make {len(items)} instances, not "
                       f"{size}: lower [splits] {split} in task.toml")


def instance_workspace(item: dict, folder: Path) -> None:
    """Lay out the instance's tree for the harness: the library with the bug, without the
    failing tests (``folder`` must not exist)."""
    _module("trees").harness_tree(item["label"], folder)


FINGERPRINT_CODE_CHARACTERS = 50
"""Fewest characters, whitespace left out, of a function's text that is a fingerprint: a
shorter one is common code (a mutant that keeps ``def __eq__(self, other): return
NotImplemented`` of a method; pandas ships that text)."""


def fingerprint_strings(item: dict) -> list[str]:
    """The original function's text (the label; a test library is never in a research
    sandbox) and the mutated function's text (one of its own per instance: two instances
    of one function differ there), each where it is long enough to be its own. Lines of
    the issue are left out: pytest's report lines and short test lines are common in any
    Python environment."""
    label = item["label"]
    buggy = label["function_source"].replace(label["removed"], label["replacement"], 1)
    return [span for span in (label["function_source"], buggy)
            if is_specific(span) and len("".join(span.split())) >= FINGERPRINT_CODE_CHARACTERS]
