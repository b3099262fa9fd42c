"""pyproject.toml says what the code imports, no more, with bounds; constraints.txt agrees.

The product's code (``vtbench/`` and the task packs' ``tasks/``) may import only what the
core dependencies or an extra declare, the tests only what those or ``dev`` declare; a core
dependency nothing imports belongs in the extra that uses it; every requirement has an upper
bound; and the exact pins ``scripts/setup`` installs satisfy every declared range.
"""

import ast
import sys
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from vtbench import layout

ROOT = layout.REPO_ROOT
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CORE = [Requirement(line) for line in PYPROJECT["dependencies"]]
EXTRAS = {name: [Requirement(line) for line in lines]
          for name, lines in PYPROJECT["optional-dependencies"].items()}
SETUP_EXTRAS = ("dev", "smol", "merge", "train", "cluster", "repofix")
"""The extras scripts/setup installs, so constraints.txt pins them."""
USED_WITHOUT_IMPORT = {
    "httptools": "uvicorn picks it up for HTTP parsing",
    "uvloop": "uvicorn picks it up as its event loop",
}


def declared(requirements: list[Requirement]) -> set[str]:
    return {canonicalize_name(requirement.name) for requirement in requirements}


def third_party_imports(folder: Path) -> dict[str, set[str]]:
    """Distribution name -> files importing it, for every import outside the standard
    library and this repository (a task pack's harness imports helpers the evaluation puts
    on its path, such as ``client`` or bfcl's ``bfcl_eval`` backends: any module or package
    named by a file or a package folder under ``folder``, or by a file of a task pack's
    harness, which the tests' own harnesses are laid beside)."""
    return {name: set(files) for name, files in _scan(folder).items()}


@cache
def _scan(folder: Path) -> dict[str, frozenset[str]]:
    names = _distributions()
    local = {"vtbench", "tasks", "tests"} | {path.stem for path in folder.rglob("*.py")} \
        | {path.parent.name for path in folder.rglob("__init__.py")} \
        | {path.stem for path in (ROOT / "tasks").rglob("*.py")
           if path.parent.name.endswith("harness")}
    found: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        for module in _imported_modules(path):
            if module in sys.stdlib_module_names or module in local:
                continue
            for distribution in names.get(module, [f"(not installed) {module}"]):
                found.setdefault(canonicalize_name(distribution), set()).add(
                    str(path.relative_to(ROOT)))
    return {name: frozenset(files) for name, files in found.items()}


@cache
def _distributions() -> Mapping[str, list[str]]:
    return packages_distributions()


def _imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return modules


def test_the_products_imports_are_all_declared() -> None:
    allowed = declared(CORE).union(*(declared(extra) for extra in EXTRAS.values()))
    product = third_party_imports(ROOT / "vtbench")
    for name, files in third_party_imports(ROOT / "tasks").items():
        product.setdefault(name, set()).update(files)
    undeclared = {name: sorted(files) for name, files in product.items() if name not in allowed}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_the_tests_imports_are_declared_in_core_or_dev() -> None:
    allowed = declared(CORE) | declared(EXTRAS["dev"])
    used = third_party_imports(ROOT / "tests")
    optional = declared([r for name, extra in EXTRAS.items() if name != "dev" for r in extra])
    undeclared = {name: sorted(files) for name, files in used.items()
                  if name not in allowed | optional}
    assert not undeclared, f"tests import undeclared packages: {undeclared}"


def test_click_is_used_only_through_typer() -> None:
    for folder in ("vtbench", "tests"):
        importers = third_party_imports(ROOT / folder).get("click", set())
        assert not importers, f"import typer's click through typer, not click: {importers}"


def test_every_core_dependency_is_imported_or_says_why_not() -> None:
    imported = set(third_party_imports(ROOT / "vtbench")) | set(
        third_party_imports(ROOT / "tasks"))
    unused = declared(CORE) - imported - set(USED_WITHOUT_IMPORT)
    assert not unused, f"core dependencies nothing imports (move them to an extra): {unused}"


def test_every_requirement_has_an_upper_bound() -> None:
    for requirement in [*CORE, *(r for extra in EXTRAS.values() for r in extra)]:
        operators = {spec.operator for spec in requirement.specifier}
        assert operators & {"<", "<=", "==", "~="}, f"{requirement} has no upper bound"


def test_the_pins_satisfy_every_declared_range() -> None:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pin = Requirement(line)
            [spec] = pin.specifier
            pins[canonicalize_name(pin.name)] = spec.version
    for requirement in [*CORE, *(r for name in SETUP_EXTRAS for r in EXTRAS[name])]:
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"constraints.txt does not pin {name}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]} outside {requirement.specifier}")
