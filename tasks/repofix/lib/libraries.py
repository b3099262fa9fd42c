"""The pinned libraries repofix mutates (trusted task code).

Each task library is a PyPI sdist vendored in ``libraries/`` with its licence, described in
``libraries/libraries.toml`` and checked against its sha256 before it is unpacked, so
``prepare`` needs no network and a changed archive is refused. Unpacked trees and the
instances generated from them are cached in ``vtbench.layout.generated_cache()``: never in
a workspace, never in a harness sandbox except as an instance's own copy.

The pair libraries (``libraries/pairs.toml``) give repair pairs for training experiments
only (``bench/repofix_smol_gpu.py``), never a task instance: they are not vendored but
fetched from PyPI by :func:`fetch` into the generated cache, checked against the same kind
of pin, where a host with no network finds them once copied there.
"""

import hashlib
import shutil
import tarfile
import tempfile
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from vtbench import layout

HERE = Path(__file__).resolve().parent.parent
VENDORED = HERE / "libraries"
ROLES = ("training", "val", "test")
PAIRS = "pairs"
"""The role of a library listed in ``pairs.toml``: repair pairs for training only."""


@dataclass(frozen=True)
class Library:
    name: str
    sdist: str
    sha256: str
    role: str
    package: str
    """The folder of the tree that is mutated (and the only one a patch may change)."""
    tests: tuple[str, ...]
    pythonpath: str
    mutants: int
    """How many mutants generation tries (chosen from the CPU-seconds a mutant's tests
    take, so one library generates in minutes)."""
    unmutated: tuple[str, ...] = ()
    """Files of the package never mutated: those other packages carry copies of, which an
    agent could read in its environment and restore a bug from."""
    url: str = ""
    """Where a pair library's sdist is fetched from (task libraries are vendored)."""

    @property
    def release(self) -> str:
        """``name-version``, the sdist's top folder."""
        return self.sdist.removesuffix(".tar.gz")


def libraries(role: str | None = None) -> list[Library]:
    """The task's libraries (``libraries.toml``), of one role or all."""
    found = read_table(VENDORED / "libraries.toml")
    assert all(library.role in ROLES for library in found)
    return [library for library in found if role is None or library.role == role]


def pair_libraries() -> list[Library]:
    """The libraries of ``pairs.toml``: repair pairs for training experiments only."""
    return read_table(VENDORED / "pairs.toml", role=PAIRS)


def read_table(path: Path, role: str | None = None) -> list[Library]:
    table = tomllib.loads(path.read_text())
    return [Library(name=name, sdist=entry["sdist"], sha256=entry["sha256"],
                    role=role or entry["role"], package=entry["package"],
                    tests=tuple(entry["tests"]), pythonpath=entry["pythonpath"],
                    mutants=entry["mutants"], unmutated=tuple(entry.get("unmutated", ())),
                    url=entry.get("url", ""))
            for name, entry in table.items()]


def library(name: str) -> Library:
    """A task library, else a pair library, by name."""
    found = [lib for lib in libraries() if lib.name == name]
    return found[0] if found else next(lib for lib in pair_libraries() if lib.name == name)


def archive(lib: Library) -> Path:
    """The library's sdist: vendored for a task library, fetched for a pair library."""
    return cache_root() / "sdists" / lib.sdist if lib.role == PAIRS else VENDORED / lib.sdist


def fetch(lib: Library) -> Path:
    """A pair library's sdist, downloaded from its pinned URL once and kept only if its
    sha256 is the pinned one."""
    target = archive(lib)
    if target.is_file():
        return target
    with urllib.request.urlopen(lib.url, timeout=60) as response:
        data = response.read()
    check_digest(data, lib, f"the download from {lib.url} is refused")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(data)
    partial.replace(target)
    return target


def check_digest(data: bytes, lib: Library, then: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != lib.sha256:
        raise RuntimeError(f"{lib.name}'s sdist has sha256 {digest}, not the pinned "
                           f"{lib.sha256}: {then}")


def cache_root() -> Path:
    return layout.generated_cache() / "repofix"


def unpacked(lib: Library) -> Path:
    """The library's pristine tree, unpacked once from its checked sdist."""
    tree = cache_root() / f"{lib.release}-{lib.sha256[:12]}"
    if tree.is_dir():
        return tree
    sdist_path = archive(lib)
    if not sdist_path.is_file():
        raise RuntimeError(f"{lib.name}'s sdist is not at {sdist_path}: fetch it first "
                           "(python bench/repofix_smol_gpu.py --fetch)")
    check_digest(sdist_path.read_bytes(), lib,
                 f"remove {sdist_path} and fetch it again" if lib.role == PAIRS
                 else f"restore {sdist_path} from the repository")
    tree.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tree.parent) as scratch:
        with tarfile.open(sdist_path) as sdist:
            sdist.extractall(scratch, filter="data")
        shutil.move(Path(scratch) / lib.release, tree)
    return tree


def source_files(lib: Library, tree: Path) -> list[str]:
    """The package's Python files (relative to the tree), its own tests and its unmutated
    files left out."""
    package = tree / lib.package
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(tree).as_posix()
        if relative in lib.unmutated:
            continue
        if not any(relative == t or relative.startswith(t.rstrip("/") + "/") for t in lib.tests):
            found.append(relative)
    return found


def copy_tree(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target
