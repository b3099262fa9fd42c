"""humaneval-full: humaneval's splits, scorer, data and harness on a hub base model, trained
by the trl trainer on GPUs. Nothing here prepares it (that takes a GPU host and the model)."""

import shutil
import tomllib
from pathlib import Path

import pytest

from tests.conftest import run_cli
from vtbench import layout
from vtbench.prepare.digest import pack_digest
from vtbench.tasks import builtin_tasks, load_task
from vtbench.tasks.materialize import materialize

FULL = layout.BUILTIN_TASKS / "humaneval-full"
HUMANEVAL = layout.BUILTIN_TASKS / "humaneval"


def test_humaneval_full_is_a_valid_full_scale_task_for_gpus() -> None:
    result = run_cli("tasks", "validate", str(FULL))
    assert result.returncode == 0, result.stderr
    task = load_task(FULL)
    assert task.spec.scale == "full" and task.spec.base_model == "Qwen/Qwen3-8B-Base"
    assert task.spec.resources.gpus >= 1 and task.spec.budgets.wall_clock_minutes >= 60
    assert (task.root / task.spec.builder.module).resolve() == HUMANEVAL / "builder.py"
    assert (task.root / task.spec.scorer.module).resolve() == HUMANEVAL / "scorer.py"
    assert task.spec.splits == load_task(HUMANEVAL).spec.splits
    assert task.id not in {t.id for t in builtin_tasks() if t.spec.scale == "tiny"}


def test_its_workspace_trains_a_lora_in_bf16_on_humanevals_data(tmp_path: Path) -> None:
    materialize(load_task(FULL), tmp_path)
    config = tomllib.loads((tmp_path / "trainer" / "config.toml").read_text())
    assert config["lora"]["enabled"] and config["precision"] == "bf16"
    assert config["processes"] == "auto"
    same = {"trainer/train.py": layout.BUILTIN_TASKS / "_hf" / "trainer" / "train.py",
            "data/train.jsonl": HUMANEVAL / "public" / "data" / "train.jsonl",
            "harness/run.py": HUMANEVAL / "public" / "harness" / "run.py"}
    for copied, original in same.items():
        assert (tmp_path / copied).read_bytes() == original.read_bytes(), copied


def test_preparing_it_without_its_model_cached_names_the_download(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    result = run_cli("prepare", "--scale", "full")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Qwen/Qwen3-8B-Base is not in the Hugging Face cache" in lines[0]
    assert "vtbench prepare --download" in lines[0]
    assert not (layout.task_store("humaneval-full") / "splits").exists()


def test_its_digest_covers_the_humaneval_files_it_borrows(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    for name in ("humaneval-full", "humaneval", "_hf"):
        shutil.copytree(layout.BUILTIN_TASKS / name, tasks / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    toml = tasks / "humaneval-full" / "task.toml"
    toml.write_text(toml.read_text().replace('"Qwen/Qwen3-8B-Base"',
                                             f'"{layout.RELEASED_BASE}"'))
    task = load_task(tasks / "humaneval-full")
    before = pack_digest(task)
    with (tasks / "humaneval" / "scorer.py").open("a") as scorer:
        scorer.write("\n# changed\n")
    assert pack_digest(task) != before
