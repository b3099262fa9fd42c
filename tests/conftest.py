"""Shared fixtures: an isolated private store per test and a minimal valid task pack."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

MINIMAL_TASK_TOML = """
id = "mini"
title = "A minimal task"
scale = "tiny"
base_model = "tiny"

[components.data]
editable = true
sources = ["public/data"]

[components.trainer]
editable = true
sources = ["public/trainer"]
entry = ["python", "trainer/train.py"]

[components.harness]
editable = false
sources = ["public/harness"]
entry = ["python", "run.py"]
decoding = { temperature = 0.0, max_tokens = 8 }

[splits]
val = 10
test = 20

[metric]
name = "exact_match"

[budgets]
wall_clock_minutes = 10
validations = 5
grader_compute_seconds = 300
llm_tokens = 1000
llm_dollars = 1.0

[scorer]
module = "scorer.py"

[builder]
module = "builder.py"

[reference]
module = "reference.py"
"""


@pytest.fixture(autouse=True)
def private_store(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own $VTBENCH_HOME; nothing touches the user's store."""
    home = tmp_path_factory.mktemp("vtbench-home")
    monkeypatch.setenv("VTBENCH_HOME", str(home))
    return home


@pytest.fixture
def minimal_task(tmp_path: Path) -> Path:
    root = tmp_path / "mini"
    for folder in ("public/data", "public/trainer", "public/harness"):
        (root / folder).mkdir(parents=True)
    for module in ("scorer.py", "builder.py", "reference.py"):
        (root / module).write_text("")
    (root / "task.toml").write_text(MINIMAL_TASK_TOML)
    (root / "README.md").write_text("# mini\n")
    return root


def run_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the real ``vtbench`` entry point in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "vtbench", *args],
        capture_output=True, text=True, check=check, env=dict(os.environ),
    )
