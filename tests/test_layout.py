"""``layout`` owns every path: the files of an episode folder are named there and nowhere else."""

import ast
from pathlib import Path

from vtbench.layout import EpisodePaths

PACKAGE = Path(__file__).resolve().parent.parent / "vtbench"


def episode_file_names() -> set[str]:
    paths = EpisodePaths(Path("/e"))
    names = {getattr(paths, name) for name in dir(EpisodePaths) if not name.startswith("_")}
    return {path.name for path in names if isinstance(path, Path)}


def literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_the_files_of_an_episode_are_spelled_only_in_layout() -> None:
    names = episode_file_names() - {"workspace"}
    spelled = {f"{path.relative_to(PACKAGE)}: {name}"
               for path in PACKAGE.rglob("*.py") if path.name != "layout.py"
               for name in names & literals(path)}
    assert spelled == set()


def test_the_grader_finds_the_snapshots_where_the_runner_keeps_them(tmp_path: Path) -> None:
    runner_side = EpisodePaths(tmp_path / "arith-noop-s0")
    assert EpisodePaths.of_workspace(runner_side.workspace).snapshots == runner_side.snapshots
    assert runner_side.snapshots.parent == runner_side.workspace.parent
