"""The grader is split by role: a transport-neutral core under one HTTP module, whose
table is the only place exceptions become status codes."""

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[2] / "vtbench" / "grader"


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_only_the_app_speaks_http() -> None:
    speaking = sorted(path.name for path in GRADER.glob("*.py")
                      if any(name.split(".")[0] in {"fastapi", "starlette"}
                             for name in imported_modules(path)))
    assert speaking == ["app.py"]


def test_the_core_only_wires_the_roles_together() -> None:
    core = (GRADER / "core.py").read_text()
    assert len(core.splitlines()) <= 200
    tree = ast.parse(core)
    longest = max(node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
                  if isinstance(node, ast.FunctionDef) and node.end_lineno is not None)
    assert longest <= 20
