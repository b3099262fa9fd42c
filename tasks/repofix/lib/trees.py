"""An instance's trees: what the harness gets and what the scorer runs (trusted task code).

The harness's tree is the library's pristine tree with the bug spliced in and the failing
tests taken out. The scorer's tree is a fresh copy with the bug, the candidate's diff
applied to the package's files and every test in place; it scores 1 only when the whole
suite runs with no failure, every formerly failing test passes and as many tests pass as
on the pristine tree (code that skips tests gains nothing).
"""

import tempfile
from pathlib import Path

from .libraries import copy_tree, library, source_files, unpacked
from .patches import PatchError, apply_file, parse
from .suite import SuiteRun, run_sandboxed
from .testfiles import remove_tests

SCORE_TIMEOUT = 60.0
"""Wall clock of one scoring run (suites run in at most 10 CPU-seconds)."""


def buggy_tree(label: dict, target: Path) -> Path:
    """The library with the bug, in ``target`` (which must not exist)."""
    lib = library(label["library"])
    copy_tree(unpacked(lib), target)
    file = target / label["path"]
    lines = file.read_text().splitlines(keepends=True)
    spliced = [*lines[:label["start"] - 1], label["replacement"], *lines[label["end"]:]]
    file.write_text("".join(spliced))
    return target


def buggy_function_lines(label: dict) -> tuple[int, int]:
    """First and last line of the bug's function in the buggy file (an insertion point,
    ``(n, n - 1)``, where the bug removed the whole method)."""
    text = (unpacked(library(label["library"])) / label["path"]).read_text()
    start = text.count("\n", 0, text.index(label["function_source"])) + 1
    end = start + label["function_source"].count("\n") - 1
    return start, end - len(label["removed"].splitlines()) + len(
        label["replacement"].splitlines())


def harness_tree(label: dict, target: Path) -> Path:
    """What the harness works on: the buggy tree without the failing tests."""
    buggy_tree(label, target)
    remove_tests(target, label["failing"])
    return target


def apply_diff(label: dict, tree: Path, diff: str) -> None:
    """Apply ``diff`` to the package's files of ``tree``; :class:`PatchError` when it
    touches anything else or does not apply."""
    allowed = set(source_files(library(label["library"]), tree))
    patches = parse(diff)
    if not patches:
        raise PatchError("no diff")
    for patch in patches:
        if patch.path not in allowed:
            raise PatchError(f"a diff may change only the library's own files, not "
                             f"{patch.path[:100]!r}")
        file = tree / patch.path
        file.write_text(apply_file(file.read_text(), patch))


def score_diff(label: dict, diff: str) -> float:
    run = scored_run(label, diff)
    return verdict(label, run) if run is not None else 0.0


def scored_run(label: dict, diff: str) -> SuiteRun | None:
    """The whole suite, sandboxed, on a fresh buggy tree with ``diff`` applied and every
    test restored; None where the diff does not apply."""
    lib = library(label["library"])
    with tempfile.TemporaryDirectory() as scratch:
        tree = buggy_tree(label, Path(scratch) / "tree")
        try:
            apply_diff(label, tree, diff)
        except (PatchError, UnicodeDecodeError):
            return None
        return run_sandboxed(tree, lib.pythonpath, list(lib.tests), SCORE_TIMEOUT)


def verdict(label: dict, run: SuiteRun) -> float:
    """1.0 when no test fails, every test the bug broke passes, as many tests pass as on
    the pristine library and the suite ended in its time."""
    passed = set(run.passed())
    fixed = all(test in passed for test in label["failing"])
    whole = not run.failed() and len(passed) >= label["suite_passed"]
    return 1.0 if fixed and whole and not run.timed_out else 0.0


def gold_diff(label: dict) -> str:
    """The diff that restores the original lines (what a perfect harness answers)."""
    removed = label["removed"].splitlines()
    replacement = label["replacement"].splitlines()
    start = label["start"]
    with tempfile.TemporaryDirectory() as scratch:
        lines = buggy_tree(label, Path(scratch) / "tree").joinpath(
            label["path"]).read_text().splitlines()
    before = lines[max(0, start - 4):start - 1]
    after = lines[start - 1 + len(replacement):start - 1 + len(replacement) + 3]
    first = start - len(before)
    body = ([f" {line}" for line in before] + [f"-{line}" for line in replacement]
            + [f"+{line}" for line in removed] + [f" {line}" for line in after])
    old_count = len(before) + len(replacement) + len(after)
    new_count = len(before) + len(removed) + len(after)
    header = f"@@ -{first},{old_count} +{first},{new_count} @@"
    return "\n".join([f"--- a/{label['path']}", f"+++ b/{label['path']}", header, *body]) + "\n"
