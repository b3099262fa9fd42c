"""A full-scale task end to end: its base model is a hub id resolved through a Hugging Face
cache on disk (the hub switched off), holding a random-init Qwen2 whose byte-level BPE
vocabulary is neither the tiny nor the smol one. ``prepare`` trains and scores the initial
and reference systems from it; a ``noop`` episode then gains exactly nothing."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.episode.conftest import quick_copy, substitute
from tests.models.hub import cache_snapshot, save_bpe_qwen2
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.models.base import resolve_base
from vtbench.prepare import prepare_task
from vtbench.prepare.digest import pack_digest
from vtbench.tasks import load_task

REPO = "vtbench-test/qwen2-bpe"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("hf-home")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
            patch.delenv(name, raising=False)
        patch.setenv("HF_HOME", str(home))
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield home / "hub"


@pytest.fixture(scope="module")
def full_scale_arith(episode_home: Path, hf_cache: Path,
                     tmp_path_factory: pytest.TempPathFactory) -> Path:
    """arith cut down (4 val, 4 test, 2 training steps) at full scale on the cached Qwen2."""
    checkpoint = tmp_path_factory.mktemp("qwen2") / "checkpoint"
    save_bpe_qwen2(checkpoint)
    cache_snapshot(hf_cache, REPO, checkpoint)
    task_dir = quick_copy(tmp_path_factory.mktemp("quick"))
    substitute(task_dir / "task.toml", r'^base_model = ".*"$', f'base_model = "{REPO}"')
    substitute(task_dir / "task.toml", r'^scale = "tiny"$', 'scale = "full"')
    prepare_task(load_task(task_dir))
    return task_dir


def vocabulary(checkpoint: Path) -> tuple[dict, list]:
    bpe = json.loads((checkpoint / "tokenizer.json").read_text())["model"]
    return bpe["vocab"], bpe["merges"]


def test_a_noop_episode_on_a_hub_base_of_another_vocabulary_gains_exactly_zero(
        full_scale_arith: Path, tmp_path: Path) -> None:
    record, _ = run_episode(RunOptions(task=str(full_scale_arith), agent="noop", out=tmp_path,
                                       budget_minutes=3))
    assert record.submitted and record.gain == 0.0
    assert record.final_test == record.initial_test is not None
    assert record.submission is not None and record.submission.candidate == "models/initial"
    task = load_task(full_scale_arith)
    assert record.provenance.task_digest == pack_digest(task)
    models = next(tmp_path.iterdir()) / "workspace" / "models"
    assert not any(path.is_symlink() for path in (models / "base").iterdir())
    for name in ("base", "initial"):
        assert vocabulary(models / name) == vocabulary(resolve_base(REPO))
        config = json.loads((models / name / "config.json").read_text())
        assert config["model_type"] == "qwen2" and config["vocab_size"] == 400
