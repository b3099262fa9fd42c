"""The pinned libraries repofix mutates (trusted task code).

Each is a PyPI sdist vendored in ``libraries/`` with its licence, described in
``libraries/libraries.toml`` and checked against its sha256 before it is unpacked, so
``prepare`` needs no network and a changed archive is refused. Unpacked trees and the
instances generated from them are cached in ``vtbench.layout.generated_cache()``: never in
a workspace, never in a harness sandbox except as an instance's own copy.
"""

import hashlib
import shutil
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from vtbench import layout

HERE = Path(__file__).resolve().parent.parent
VENDORED = HERE / "libraries"
ROLES = ("training", "val", "test")


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

    @property
    def release(self) -> str:
        """``name-version``, the sdist's top folder."""
        return self.sdist.removesuffix(".tar.gz")


def libraries(role: str | None = None) -> list[Library]:
    table = tomllib.loads((VENDORED / "libraries.toml").read_text())
    found = [Library(name=name, sdist=entry["sdist"], sha256=entry["sha256"],
                     role=entry["role"], package=entry["package"], tests=tuple(entry["tests"]),
                     pythonpath=entry["pythonpath"], mutants=entry["mutants"],
                     unmutated=tuple(entry.get("unmutated", ())))
             for name, entry in table.items()]
    assert all(library.role in ROLES for library in found)
    return [library for library in found if role is None or library.role == role]


def library(name: str) -> Library:
    return next(found for found in libraries() if found.name == name)


def cache_root() -> Path:
    return layout.generated_cache() / "repofix"


def unpacked(lib: Library) -> Path:
    """The library's pristine tree, unpacked once from its checked sdist."""
    tree = cache_root() / f"{lib.release}-{lib.sha256[:12]}"
    if tree.is_dir():
        return tree
    archive = VENDORED / lib.sdist
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != lib.sha256:
        raise RuntimeError(f"{archive} has sha256 {digest}, not the pinned {lib.sha256}: "
                           "restore the vendored sdist from the repository")
    tree.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tree.parent) as scratch:
        with tarfile.open(archive) as sdist:
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
