"""The layering of DESIGN.md ("Layers"), held by reading every import in the package.

A layer may import only itself and the layers above it; no package imports another
package's private ``_x`` module or name; importing the command line loads no torch.
A module that belongs to no layer fails the test: a new layer is added to DESIGN.md and
to ``LAYERS`` together.
"""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "vtbench"

# DESIGN.md's layer list, top (imported by all) to bottom (imports all).
LAYERS: list[tuple[str, ...]] = [
    (
        "errors",
        "boundedjson",
        "printable",
        "layout",
        "gpus",
        "processes",
        "intervals",
        "spec",
        "sandbox",
        "reservation",
        "models",
        "gateway",
        "grader.api",
        "client",
    ),
    ("tasks",),
    ("evaluation", "workspace", "agents"),
    ("prepare",),
    ("grader",),
    ("episode",),
    ("attribution",),
    ("campaign",),
    ("analysis",),
    ("cli", "__main__"),
]


def unit_of(module: str) -> str:
    """The longest entry of ``LAYERS`` that ``module`` (dotted, without ``vtbench.``) is in."""
    entries = [entry for layer in LAYERS for entry in layer]
    matches = [e for e in entries if module == e or module.startswith(e + ".")]
    if not matches:
        raise AssertionError(f"vtbench.{module} is in no layer: add it to DESIGN.md and LAYERS")
    return max(matches, key=len)


def layer_of(module: str) -> int:
    unit = unit_of(module)
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[str]:
    """Every ``vtbench`` module or name ``path`` imports, lazily or not, without ``vtbench.``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return [name.removeprefix("vtbench.") for name in found if name.startswith("vtbench.")]


def is_private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def top_package(module: str) -> str:
    return module.split(".")[0]


def violations(root: Path) -> list[str]:
    """One line per import that breaks the layering, for the package at ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        importer = module_name(path, root)
        for imported in imports_of(path):
            if top_package(imported) == top_package(importer):
                continue
            if is_private(imported):
                found.append(f"{importer} imports private {imported}")
            elif layer_of(imported) > layer_of(importer):
                found.append(f"{importer} imports {imported}, a layer below it")
    return found


def write_package(root: Path, modules: dict[str, str]) -> Path:
    for dotted, source in modules.items():
        path = root.joinpath(*dotted.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def test_the_package_keeps_the_layers_of_the_design() -> None:
    assert violations(PACKAGE) == []


def test_an_import_up_the_layers_is_found(tmp_path: Path) -> None:
    root = write_package(
        tmp_path,
        {
            "tasks.registry": "def f():\n    from vtbench.grader.ledger import Ledger\n",
            "grader.ledger": "from vtbench.tasks.registry import f\n",
        },
    )
    assert violations(root) == ["tasks.registry imports grader.ledger.Ledger, a layer below it"]


def test_the_wire_contract_sits_above_the_grader(tmp_path: Path) -> None:
    root = write_package(
        tmp_path,
        {
            "client": "from vtbench.grader.api import ValidationReply\n",
            "grader.api": "from vtbench.errors import VtbenchError\n",
            "agents.llm": "from vtbench.grader.core import Grader\n",
        },
    )
    assert violations(root) == ["agents.llm imports grader.core.Grader, a layer below it"]


def test_a_private_module_or_name_of_another_package_is_found(tmp_path: Path) -> None:
    root = write_package(
        tmp_path,
        {
            "evaluation.run": "from vtbench.sandbox._spec import Mount\n",
            "prepare.jobs": "from vtbench.tasks.store import _secret\n",
            "sandbox._bwrap": "from vtbench.sandbox._spec import Mount\n",
        },
    )
    assert violations(root) == [
        "evaluation.run imports private sandbox._spec.Mount",
        "prepare.jobs imports private tasks.store._secret",
    ]


def test_a_module_in_no_layer_is_named(tmp_path: Path) -> None:
    root = write_package(tmp_path, {"cli.app": "import vtbench.scheduler\n"})
    try:
        violations(root)
    except AssertionError as err:
        assert "vtbench.scheduler is in no layer" in str(err)
    else:
        raise AssertionError("a module outside every layer passed")


def test_the_command_line_loads_no_torch() -> None:
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['vtbench', '--help']\n"
        "try:\n"
        "    runpy.run_module('vtbench', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_client_of_the_wire_contract_loads_no_ledger() -> None:
    probe = ("import sys, vtbench.client, vtbench.grader.api\n"
             "print(sorted(m for m in sys.modules if m.startswith('vtbench.grader')))\n")
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "['vtbench.grader', 'vtbench.grader.api']"
