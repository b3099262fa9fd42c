"""Generating a library's instances: mutate, run the tests that reach the mutant, keep it
when 1 to 5 tests fail (trusted task code, run by ``prepare``).

The library's suite runs once on the pristine tree with a call trace, which tells for each
function the tests that call it; a mutant then runs only those tests (all of them where the
function runs at import), stops at the sixth failure (the mutant is dropped whatever the
rest do) and is killed past :data:`HANG_FACTOR` times the pristine suite's CPU time, so
one library takes a few minutes. A mutant is kept when 1-5 tests fail, every failing test
passes on the pristine tree and can be taken out of the tree, and the pristine suite runs
in at most :data:`SUITE_CPU_SECONDS` (on a quiet host; a busy one is allowed
:data:`BUSY_HOST_HEADROOM` times that); at most :data:`PER_FUNCTION` instances come from one
function, and a library tries its ``mutants`` (``libraries.toml``). Mutants are tried in
rounds of :data:`ROUND` on as many copies of the tree as the process may use cores, and
each round is decided in the candidates' order, so the instances do not depend on the
number of cores. The result is cached per library in the private store, so splits are
drawn from it without generating again.
"""

import hashlib
import json
import math
import os
import queue
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import issues
from .libraries import Library, cache_root, copy_tree, source_files, unpacked
from .mutants import Mutant, mutants
from .suite import SuiteRun, run_local
from .testfiles import removable

MIN_FAILING, MAX_FAILING = 1, 5
PER_FUNCTION = 2
SUITE_CPU_SECONDS = 10.0
BUSY_HOST_HEADROOM = 3.0
"""How much slower than :data:`SUITE_CPU_SECONDS` the pristine suite may run before the
library is refused: CPU time grows on a loaded host (mistune's 6 CPU-s suite measured 13.5
beside two other jobs), and that must not stop a prepare; a suite slower than this is one
the library choice got wrong."""
MUTANT_TIMEOUT = 30.0
"""Wall clock of one mutant's run, for a mutant that hangs without using the CPU (the CPU
limit stops the others, however busy the machine is)."""
HANG_FACTOR = 2.0
"""A mutant's run is killed after this many times the pristine suite's CPU time (plus a
second): a removed loop step that never ends costs a few CPU-seconds, not the timeout."""
ROUND = 16
"""Mutants tried side by side, then kept or dropped in their order."""
GENERATOR_VERSION = 4


def cache_file(lib: Library) -> Path:
    """Named by everything that decides the instances: the sdist, this generator's version,
    the library's mutant count and its unmutated files."""
    unmutated = ""
    if lib.unmutated:
        unmutated = ".u" + hashlib.sha256("\n".join(lib.unmutated).encode()).hexdigest()[:8]
    return cache_root() / (f"{lib.release}-{lib.sha256[:12]}.v{GENERATOR_VERSION}"
                           f".m{lib.mutants}{unmutated}.jsonl")


def cached(lib: Library) -> list[dict]:
    """The library's instances, generated on the first call (written whole or not at all)."""
    path = cache_file(lib)
    if path.is_file():
        return [json.loads(line) for line in path.read_text().splitlines()]
    found = generate(lib, lib.mutants)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text("".join(json.dumps(row) + "\n" for row in found))
    partial.replace(path)
    return found


def covering(calls: dict[str, list[str]], key: str) -> list[str] | None:
    """The tests that call the function at ``key``; None when it runs at import."""
    if key in calls.get("", []):
        return None
    return sorted(test for test, keys in calls.items() if test and key in keys)


def baseline(lib: Library, tree: Path) -> tuple[SuiteRun, int]:
    """The pristine suite's results and call trace, and the CPU-seconds a mutant's run may
    take; the suite must pass and take at most :data:`SUITE_CPU_SECONDS` untraced (the trace
    slows it several times), with :data:`BUSY_HOST_HEADROOM` for a loaded host."""
    plain = run_local(tree, lib.pythonpath, list(lib.tests), timeout=300)
    if plain.cpu_seconds > SUITE_CPU_SECONDS * BUSY_HOST_HEADROOM or not plain.passed():
        raise RuntimeError(f"{lib.release}: its suite takes {plain.cpu_seconds:.1f} CPU-s and "
                           f"passes {len(plain.passed())} tests; pick another library")
    traced = run_local(tree, lib.pythonpath, list(lib.tests), timeout=600,
                       trace=str(tree / lib.package))
    return traced, math.ceil(HANG_FACTOR * plain.cpu_seconds) + 1


Modifier = Callable[[str], list[Mutant]]
"""A file's source to its mutants: :func:`.mutants.mutants` for every instance."""


def candidates(lib: Library, tree: Path, modifier: Modifier = mutants) -> list[tuple[str, Mutant]]:
    found = [(path, mutant) for path in source_files(lib, tree)
             for mutant in modifier((tree / path).read_text())]
    random.Random(lib.release).shuffle(found)
    return found


def generate(lib: Library, max_mutants: int, workers: int | None = None,
             modifier: Modifier = mutants) -> list[dict]:
    """The library's instances (see the module docstring), on ``workers`` tree copies
    (default: the cores this process may use); ``modifier`` makes the mutants to try."""
    with tempfile.TemporaryDirectory() as scratch:
        tree = copy_tree(unpacked(lib), Path(scratch) / lib.release)
        pristine, cpu_limit = baseline(lib, tree)
        passing = set(pristine.passed())
        calls = pristine.calls or {}
        count = workers or len(os.sched_getaffinity(0))
        spare: queue.SimpleQueue[Path] = queue.SimpleQueue()
        for index in range(count):
            spare.put(copy_tree(tree, Path(scratch) / f"copy{index}" / lib.release))

        def attempt_on_a_copy(path: str, mutant: Mutant, tests: list[str] | None) -> dict | None:
            copy = spare.get()
            try:
                return attempt(lib, copy, path, mutant, tests, passing, cpu_limit)
            finally:
                spare.put(copy)

        kept: list[dict] = []
        per_function: Counter[str] = Counter()
        with ThreadPoolExecutor(count) as pool:
            for batch in rounds(lib, tree, calls, per_function, max_mutants, modifier):
                found = list(pool.map(lambda args: attempt_on_a_copy(*args), batch))
                for (path, mutant, _), instance in zip(batch, found, strict=True):
                    where = f"{path}:{mutant.function}"
                    if instance is not None and per_function[where] < PER_FUNCTION:
                        per_function[where] += 1
                        kept.append(instance)
        return kept


Trial = tuple[str, Mutant, list[str] | None]


def rounds(lib: Library, tree: Path, calls: dict[str, list[str]], per_function: Counter[str],
           max_mutants: int, modifier: Modifier = mutants) -> Iterator[list[Trial]]:
    """The mutants to try, :data:`ROUND` at a time, at most ``max_mutants`` in all; a
    function that already gave :data:`PER_FUNCTION` instances (``per_function``, updated by
    the caller between rounds) gives no more mutants, nor one no test reaches."""
    batch: list[Trial] = []
    tried = 0
    for path, mutant in candidates(lib, tree, modifier):
        if tried >= max_mutants:
            break
        if per_function[f"{path}:{mutant.function}"] >= PER_FUNCTION:
            continue
        tests = covering(calls, f"{tree / path}:{mutant.function_start}")
        if tests == []:
            continue
        tried += 1
        batch.append((path, mutant, tests))
        if len(batch) == ROUND:
            yield batch
            batch = []
    if batch:
        yield batch


def attempt(lib: Library, tree: Path, path: str, mutant: Mutant, tests: list[str] | None,
            passing: set[str], cpu_limit: int) -> dict | None:
    """The mutant's instance, or None; its run stops at the first failure past
    :data:`MAX_FAILING`, which decides it as the whole run would."""
    file = tree / path
    original = file.read_text()
    file.write_text(mutant.apply(original))
    try:
        run = run_local(tree, lib.pythonpath, tests if tests is not None else list(lib.tests),
                        timeout=MUTANT_TIMEOUT, max_failures=MAX_FAILING + 1,
                        cpu_seconds=cpu_limit)
    finally:
        file.write_text(original)
    failing = run.failed()
    if run.timed_out or not MIN_FAILING <= len(failing) <= MAX_FAILING \
            or not set(failing) <= passing or not all(removable(tree, t) for t in failing):
        return None
    return record(lib, path, mutant, original, {t: run.results[t] for t in failing},
                  len(passing))


def record(lib: Library, path: str, mutant: Mutant, original: str,
           failures: dict[str, dict], suite_passed: int) -> dict:
    lines = original.splitlines(keepends=True)
    return {
        "key": f"{lib.name}:{path}:{mutant.start}-{mutant.end}:{mutant.kind}",
        "library": lib.name, "release": lib.release, "path": path, "kind": mutant.kind,
        "function": mutant.function, "start": mutant.start, "end": mutant.end,
        "replacement": mutant.replacement,
        "removed": "".join(lines[mutant.start - 1:mutant.end]),
        "function_source": "".join(lines[mutant.function_start - 1:mutant.function_end]),
        "failing": sorted(failures),
        "issue": issues.issue_text(failures),
        "suite_passed": suite_passed,
    }
