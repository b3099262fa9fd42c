"""repofix: the instance generator, the per-instance trees and the scorer, on real
libraries (inflection, the smallest training library: its suite runs in about a second).
The tests on generated instances are slow: generating them takes minutes."""

import ast
import dataclasses
import importlib
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from vtbench import layout
from vtbench.tasks import load_task

ROOT = layout.BUILTIN_TASKS / "repofix"
TASK = load_task(ROOT)
LIB = TASK.builder._lib()


def module(name: str):
    return importlib.import_module(f"{LIB.__name__}.{name}")


libraries, instances, mutants, suite, trees, flips = (module(n) for n in (
    "libraries", "instances", "mutants", "suite", "trees", "flips"))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """inflection's instances from its first 12 mutants (generated, not read from a cache)."""
    found = instances.generate(libraries.library("inflection"), max_mutants=12)
    assert found, "inflection should give instances"
    return found


def test_every_library_is_pinned_by_hash_in_one_role_with_its_licence() -> None:
    found = libraries.libraries()
    assert len({lib.name for lib in found}) == len(found)
    assert {lib.role for lib in found} == {"training", "val", "test"}
    assert len([lib for lib in found if lib.role != "training"]) >= 8
    for lib in found:
        assert len(lib.sha256) == 64
        assert (libraries.VENDORED / "licenses" / f"{lib.release}.txt").is_file()


def test_a_changed_sdist_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTBENCH_GENERATED", str(tmp_path / "generated"))
    vendored = tmp_path / "libraries"
    vendored.mkdir()
    (vendored / "libraries.toml").write_text((libraries.VENDORED / "libraries.toml").read_text())
    (vendored / "inflection-0.5.1.tar.gz").write_bytes(b"not the sdist")
    monkeypatch.setattr(libraries, "VENDORED", vendored)
    with pytest.raises(RuntimeError, match="not the pinned"):
        libraries.unpacked(libraries.library("inflection"))


def test_pair_libraries_are_pinned_by_url_and_hash_and_never_task_libraries() -> None:
    pairs = libraries.pair_libraries()
    assert len(pairs) >= 30
    task_names = {lib.name for lib in libraries.libraries()}
    assert len({lib.name for lib in pairs}) == len(pairs)
    assert not task_names & {lib.name for lib in pairs}
    for lib in pairs:
        assert lib.role == libraries.PAIRS
        assert lib.url.startswith("https://files.pythonhosted.org/")
        assert lib.url.endswith("/" + lib.sdist)
        assert len(lib.sha256) == 64
        assert libraries.library(lib.name) == lib


def pinned_sdist(tmp_path: Path, release: str) -> tuple[Path, str]:
    """A small sdist (one module, one test) and its sha256."""
    import hashlib
    import tarfile

    tree = tmp_path / "src" / release
    (tree / "tests").mkdir(parents=True)
    (tree / "demo.py").write_text("def double(x):\n    return 2 * x\n")
    (tree / "tests" / "test_demo.py").write_text("from demo import double\n\n"
                                                  "def test_double():\n    assert double(2) == 4\n")
    archive = tmp_path / f"{release}.tar.gz"
    with tarfile.open(archive, "w:gz") as sdist:
        sdist.add(tree, arcname=release)
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


def test_a_pair_library_is_fetched_and_unpacked_only_with_its_pinned_hash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTBENCH_GENERATED", str(tmp_path / "generated"))
    archive, digest = pinned_sdist(tmp_path, "demo-1.0")
    lib = libraries.Library(name="demo", sdist="demo-1.0.tar.gz", sha256="0" * 64,
                            role=libraries.PAIRS, package=".", tests=("tests",),
                            pythonpath=".", mutants=10, url=archive.as_uri())
    with pytest.raises(RuntimeError, match="not the pinned"):
        libraries.fetch(lib)
    assert not list((tmp_path / "generated").rglob("*.tar.gz"))
    with pytest.raises(RuntimeError, match="fetch it first"):
        libraries.unpacked(lib)
    pinned = dataclasses.replace(lib, sha256=digest)
    assert libraries.fetch(pinned) == libraries.archive(pinned)
    tree = libraries.unpacked(pinned)
    assert (tree / "demo.py").read_text().startswith("def double")
    assert libraries.source_files(pinned, tree) == ["demo.py"]


@pytest.mark.slow
def test_every_pair_library_fetched_from_pypi_unpacks_with_its_suite_and_mutants() -> None:
    """Downloads the pair libraries' sdists (about 6.5 MB from PyPI, once per cache)."""
    for lib in libraries.pair_libraries():
        libraries.fetch(lib)
        tree = libraries.unpacked(lib)
        assert all((tree / path).exists() for path in lib.tests), lib.name
        assert len(instances.candidates(lib, tree)) >= 20, lib.name
        assert len(instances.candidates(lib, tree, flips.flips)) >= 20, lib.name


def test_every_mutant_removes_code_and_still_parses() -> None:
    tree = libraries.unpacked(libraries.library("toolz"))
    seen = Counter()
    for path in libraries.source_files(libraries.library("toolz"), tree):
        source = (tree / path).read_text()
        for mutant in mutants.mutants(source):
            changed = mutant.apply(source)
            ast.parse(changed)
            assert len(changed) < len(source)
            seen[mutant.kind] += 1
    assert set(seen) <= set(mutants.KINDS) and len(seen) >= 4


def test_every_flip_changes_one_operator_constant_or_condition_on_one_line() -> None:
    seen = Counter()
    for name in ("inflection", "cachetools"):
        seen += flips_seen(name)
    assert set(seen) == set(flips.KINDS)


def flips_seen(name: str) -> Counter[str]:
    tree = libraries.unpacked(libraries.library(name))
    seen: Counter[str] = Counter()
    for path in libraries.source_files(libraries.library(name), tree):
        source = (tree / path).read_text()
        lines = source.splitlines(keepends=True)
        for mutant in flips.flips(source):
            changed = mutant.apply(source).splitlines(keepends=True)
            ast.parse("".join(changed))
            assert mutant.start == mutant.end and len(changed) == len(lines)
            assert [i for i, (a, b) in enumerate(zip(lines, changed, strict=True)) if a != b] == [
                mutant.start - 1]
            before, after = lines[mutant.start - 1], changed[mutant.start - 1]
            assert mutant.kind != "invert_condition" or "not " in after
            assert len(after) - len(before) <= 6  # an operator's or constant's text, a "not"
            seen[mutant.kind] += 1
    return seen


def test_a_flipped_comparison_and_condition_keep_the_lines_formatting() -> None:
    source = ('def f(a, b):\n    """Doc with a == b."""\n'
              '    if a.x["k"] == b:  # same\n        return a + 1\n    return a and b\n')
    found = {m.kind: m.replacement for m in flips.flips(source)}
    assert found["flip_compare"] == '    if a.x["k"] != b:  # same\n'
    assert found["invert_condition"] == '    if not (a.x["k"] == b):  # same\n'
    assert found["flip_operator"] == "        return a - 1\n"
    assert found["shift_constant"] == "        return a + 2\n"
    assert found["flip_boolean"] == "    return a or b\n"


def test_a_mutants_run_stops_at_the_failure_that_drops_it(tmp_path: Path) -> None:
    (tmp_path / "test_many.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('n', range(20))\n"
        "def test_fails(n):\n    assert n < 0\n")
    run = suite.run_local(tmp_path, ".", ["test_many.py"], timeout=60,
                          max_failures=instances.MAX_FAILING + 1)
    assert len(run.failed()) == instances.MAX_FAILING + 1 == len(run.results)


def test_a_mutant_that_spins_is_killed_at_its_cpu_seconds(tmp_path: Path) -> None:
    (tmp_path / "test_spin.py").write_text("def test_spins():\n    while True:\n        pass\n")
    started = time.monotonic()
    run = suite.run_local(tmp_path, ".", ["test_spin.py"], timeout=120, cpu_seconds=1)
    assert not run.timed_out and not run.results and time.monotonic() - started < 60
    assert not list(tmp_path.glob("core*"))


def test_a_suite_over_its_cpu_seconds_is_allowed_a_busy_hosts_headroom_and_no_more(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("def one():\n    return 1\n")
    (tmp_path / "test_one.py").write_text("from pkg import one\n\n"
                                          "def test_one():\n    assert one() == 1\n")
    lib = dataclasses.replace(libraries.library("inflection"), package="pkg",
                              tests=("test_one.py",), pythonpath=".")
    spent = suite.run_local(tmp_path, ".", ["test_one.py"], timeout=60).cpu_seconds
    # Twice the limit, as on a loaded host: within the headroom.
    monkeypatch.setattr(instances, "SUITE_CPU_SECONDS", spent / 2)
    run, _ = instances.baseline(lib, tmp_path)
    assert run.passed() == ["test_one.py::test_one"]
    # Five times the limit: beyond it.
    monkeypatch.setattr(instances, "SUITE_CPU_SECONDS", spent / 5)
    with pytest.raises(RuntimeError, match="pick another library"):
        instances.baseline(lib, tmp_path)


def test_generation_and_scoring_run_pytest_without_the_plugins_installed_beside_it(
        tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text(
        "import sys\n\ndef test_no_plugin():\n"
        "    assert not {'_hypothesis_pytestplugin', 'anyio'} & set(sys.modules)\n")
    local = suite.run_local(tmp_path, ".", ["test_plain.py"], timeout=60)
    sandboxed = suite.run_sandboxed(tmp_path, ".", ["test_plain.py"], timeout=60)
    assert local.passed() == sandboxed.passed() == ["test_plain.py::test_no_plugin"]


@pytest.mark.slow
def test_kept_instances_fail_one_to_five_tests_at_most_two_per_function(
        generated: list[dict]) -> None:
    per_function = Counter((row["path"], row["function"]) for row in generated)
    assert max(per_function.values()) <= instances.PER_FUNCTION
    for row in generated:
        assert 1 <= len(row["failing"]) <= 5
        assert row["kind"] in mutants.KINDS and row["removed"].strip()


@pytest.mark.slow
def test_the_issue_quotes_the_failing_tests_structured_report(generated: list[dict]) -> None:
    for row in generated:
        assert row["failing"][0] in row["issue"]
        assert "Error: " in row["issue"] and len(row["issue"]) > 200


@pytest.mark.slow
def test_the_harness_tree_has_the_bug_and_lacks_the_failing_tests(
        generated: list[dict], tmp_path: Path) -> None:
    row = generated[0]
    tree = trees.harness_tree(row, tmp_path / "tree")
    pristine = libraries.unpacked(libraries.library("inflection"))
    assert (tree / row["path"]).read_text() != (pristine / row["path"]).read_text()
    for test_id in row["failing"]:
        name = test_id.split("::")[-1].split("[")[0]
        assert f"def {name}(" not in (tree / test_id.split("::")[0]).read_text()


@pytest.mark.slow
def test_every_gold_patch_scores_one(generated: list[dict]) -> None:
    for row in generated:
        assert trees.score_diff(row, trees.gold_diff(row)) == 1.0, row["key"]


@pytest.mark.slow
def test_a_scored_run_counts_the_cpu_time_of_the_sandboxed_suite(generated: list[dict]) -> None:
    """The suite runs in a sandbox, not as the scorer's child: its CPU time comes from the
    sandbox's cgroup; a diff that does not apply runs nothing."""
    row = generated[0]
    run = trees.scored_run(row, trees.gold_diff(row))
    assert run is not None and trees.verdict(row, run) == 1.0
    assert run.cpu_seconds is not None and run.cpu_seconds > 0.1, run.cpu_seconds
    assert trees.scored_run(row, "--- a/nowhere\n+++ b/nowhere\n@@ -1 +1 @@\n-x\n+y\n") is None


@pytest.mark.slow
def test_the_empty_diff_scores_zero(generated: list[dict]) -> None:
    assert trees.score_diff(generated[0], "") == 0.0


@pytest.mark.slow
def test_a_diff_that_deletes_or_edits_the_failing_tests_scores_zero(
        generated: list[dict], tmp_path: Path) -> None:
    row = generated[0]
    test_path, *_ = row["failing"][0].split("::")
    pristine = libraries.unpacked(libraries.library("inflection"))
    lines = (pristine / test_path).read_text().splitlines()
    deleting = "\n".join([f"--- a/{test_path}", f"+++ b/{test_path}",
                          f"@@ -1,{len(lines)} +0,0 @@", *(f"-{line}" for line in lines)])
    assert trees.score_diff(row, deleting + "\n") == 0.0
    skipping = "\n".join([f"--- a/{test_path}", f"+++ b/{test_path}", "@@ -1,1 +1,2 @@",
                          "+import pytest; pytest.skip(allow_module_level=True)",
                          f" {lines[0]}"])
    assert trees.score_diff(row, skipping + "\n") == 0.0
    gold_and_tests = trees.gold_diff(row) + deleting + "\n"
    assert trees.score_diff(row, gold_and_tests) == 0.0


@pytest.mark.slow
def test_a_diff_leaving_the_tree_scores_zero(generated: list[dict]) -> None:
    row = generated[0]
    escaping = trees.gold_diff(row).replace(f"a/{row['path']}", "a/../../etc/passwd").replace(
        f"b/{row['path']}", "b/../../etc/passwd")
    assert trees.score_diff(row, escaping) == 0.0


@pytest.mark.slow
def test_the_instances_do_not_depend_on_how_many_cores_try_the_mutants(
        generated: list[dict]) -> None:
    alone = instances.generate(libraries.library("inflection"), max_mutants=12, workers=1)
    assert alone == generated


@pytest.mark.slow
def test_the_generated_cache_is_reused(generated: list[dict], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTBENCH_GENERATED", str(tmp_path / "generated"))
    lib = libraries.library("inflection")
    path = instances.cache_file(lib)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in generated))
    assert instances.cached(lib) == generated


def test_a_changed_mutant_count_does_not_reuse_the_cache() -> None:
    lib = libraries.library("inflection")
    fewer = dataclasses.replace(lib, mutants=lib.mutants - 1)
    assert instances.cache_file(fewer) != instances.cache_file(lib)


def test_no_task_library_is_importable_in_the_harness_sandbox(tmp_path: Path) -> None:
    from vtbench.evaluation.harness import harness_spec
    from vtbench.sandbox import get_sandbox

    names = [lib.release.rsplit("-", 1)[0] for lib in libraries.libraries()]
    probe = ("import importlib.util, importlib.metadata as m, sys\n"
             "names = sys.argv[1:]\n"
             "found = [n for n in names if importlib.util.find_spec(n)]\n"
             "found += [d.metadata['Name'] for d in m.distributions()\n"
             "          if d.metadata['Name'] and d.metadata['Name'].lower() in names]\n"
             "print('FOUND', found)\n")
    (tmp_path / "h").mkdir()
    (tmp_path / "io").mkdir()
    (tmp_path / "server").mkdir()
    spec = harness_spec(tmp_path / "h", tmp_path / "io", tmp_path / "server" / "model.sock",
                        timeout=60, lazy=True)
    import sys

    result = get_sandbox("bwrap").run([sys.executable, "-c", probe, *names], spec)
    assert result.stdout.decode().strip() == "FOUND []", result.stderr.decode()[-500:]


def long_lines(lib: "libraries.Library") -> dict[str, set[str]]:
    """File key -> the lines of 40 characters or more of that module of the library's
    package. The key is the file's name; a package's own module (``tabulate/__init__.py``)
    is found under that and as a module of its own (``tabulate.py``), as vendored copies
    often have it."""
    found = {}
    tree = libraries.unpacked(lib)
    for path in (tree / relative for relative in libraries.source_files(lib, tree)):
        lines = {line.strip() for line in path.read_text(errors="replace").splitlines()
                 if len(line.strip()) >= 40}
        if len(lines) >= 10:
            found[module_key(path.parent.name, path.name)] = lines
            if path.name == "__init__.py":
                found[f"{path.parent.name}.py"] = lines
    return found


def module_key(folder: str, name: str) -> str:
    return f"{folder}/{name}" if name == "__init__.py" else name


def python_folders() -> list[Path]:
    """The environment's prefix and the Python libraries beside it (the base interpreter's,
    the system's), none inside another."""
    found = {Path(sys.prefix), Path(sys.base_prefix) / "lib",
             *Path("/usr/lib").glob("python3*"), *Path("/usr/local/lib").glob("python3*")}
    return sorted(top for top in found
                  if top.is_dir() and not any(other in top.parents for other in found))


def copies_in_the_environment(libs: list["libraries.Library"]) -> dict[str, list[str]]:
    """Library name -> files under the interpreters' prefixes that hold most of one of its
    modules' long lines: copies, installed or vendored inside another package."""
    wanted: dict[str, list[tuple[str, set[str]]]] = {}
    for lib in libs:
        for key, lines in long_lines(lib).items():
            wanted.setdefault(key, []).append((lib.name, lines))
    copies: dict[str, list[str]] = {}
    for top in python_folders():
        for root, _, files in os.walk(top):
            for name in files:
                for owner, lines in wanted.get(module_key(Path(root).name, name), []):
                    text = (Path(root) / name).read_text(errors="replace")
                    if sum(line in text for line in lines) * 2 >= len(lines):
                        copies.setdefault(owner, []).append(str(Path(root) / name))
    return copies


def test_no_val_or_test_library_has_a_copy_in_the_environment_the_sandboxes_see() -> None:
    """The sandboxes mount the environment, so a copy vendored inside another package is
    readable by the agent though not importable by its own name: ray vendors tabulate (a
    training library for that reason) and soupsieve ships bracex's ``__meta__.py`` (never
    mutated for that reason)."""
    evaluated = [lib for lib in libraries.libraries() if lib.role != "training"]
    assert copies_in_the_environment(evaluated) == {}


def test_an_unmutated_file_is_never_a_source_of_mutants_and_changes_the_cache() -> None:
    lib = libraries.library("bracex")
    tree = libraries.unpacked(lib)
    assert lib.unmutated == ("bracex/__meta__.py",)
    assert (tree / "bracex" / "__meta__.py").is_file()
    assert "bracex/__meta__.py" not in libraries.source_files(lib, tree)
    assert "bracex/__init__.py" in libraries.source_files(lib, tree)
    every_file = dataclasses.replace(lib, unmutated=())
    assert instances.cache_file(every_file) != instances.cache_file(lib)


def test_a_function_text_too_short_to_be_its_own_is_no_fingerprint() -> None:
    """A toolz instance whose bug leaves ``__eq__`` as a common method: pandas ships the
    same two lines, and the leak audit refused the task on that file."""
    condition = ("        if isinstance(other, Compose):\n"
                 "            return other.first == self.first and other.funcs == self.funcs\n")
    original = f"    def __eq__(self, other):\n{condition}        return NotImplemented\n"
    label = {"function_source": original, "removed": condition, "replacement": ""}
    assert TASK.builder.fingerprint_strings({"label": label}) == [original]


def test_the_same_edit_of_two_identical_functions_is_drawn_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def row(key: str, issue: str, source: str) -> dict:
        return {"key": key, "release": "lib-1.0", "issue": issue, "function_source": source,
                "removed": "    return 1\n", "replacement": ""}

    twin = "def get(self):\n    return 1\n"
    rows = [row("a.py:get", "test_a fails", twin), row("b.py:get", "test_b fails", twin),
            row("c.py:other", "test_c fails", "def other():\n    return 1\n")]
    monkeypatch.setattr(TASK.builder, "pool", lambda split: [dict(r) for r in rows])
    drawn = TASK.builder.build_split(random.Random(0), 2, set(), "test")
    assert sorted(item["label"]["key"] for item in drawn)[-1] == "c.py:other"
    with pytest.raises(RuntimeError, match="make 2 instances, not 3"):
        TASK.builder.build_split(random.Random(0), 3, set(), "test")
