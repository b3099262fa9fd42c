"""repofix end to end on this machine, cut down (2 val and 2 test instances, one training
step, short agent loops): ``repofix-smol`` on SmolLM2-135M with the ``reference`` and
``noop`` agents, and ``repofix`` at full scale on a random-init Qwen2 with a BPE
vocabulary of its own, resolved through a Hugging Face cache on disk (no download).
Instances come from the generated cache (``$VTBENCH_GENERATED``): the first run on a host
generates them."""

import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w

from tests.episode.conftest import substitute
from tests.episode.test_full_scale import REPO
from tests.models.hub import cache_snapshot, save_bpe_qwen2
from vtbench import layout
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.prepare import prepare_task
from vtbench.tasks import load_task

pytestmark = pytest.mark.slow


ROLES = {"toolz": "val", "isodate": "test", "inflection": "training"}
"""One library per role in the cut-down copies (isodate stands in for a test library: the
first run on a host generates only these three)."""


def cut_down(root: Path, task_id: str) -> Path:
    """repofix (and the packs it borrows from) with 2 val and 2 test instances from one
    library each, one training step of one row, one agent step and short answers."""
    tasks = root / "tasks"
    for name in {task_id, "repofix", "_hf"}:
        shutil.copytree(layout.BUILTIN_TASKS / name, tasks / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    table = tasks / "repofix" / "libraries" / "libraries.toml"
    kept = tomllib.loads(table.read_text())
    table.write_text(tomli_w.dumps({name: {**kept[name], "role": role}
                                    for name, role in ROLES.items()}))
    toml = tasks / task_id / "task.toml"
    substitute(toml, r"^val = \d+", "val = 2")
    substitute(toml, r"^test = \d+", "test = 2")
    substitute(tasks / task_id / "public" / "trainer" / "config.toml", r"^steps = \d+",
               "steps = 1")
    substitute(tasks / task_id / "public" / "trainer" / "config.toml", r"^batch_size = \d+",
               "batch_size = 1")
    substitute(tasks / "repofix" / "reference.py", r'"steps": \d+', '"steps": 1')
    for harness in ("public/harness", "reference_harness"):
        settings = tasks / "repofix" / harness / "harness.toml"
        substitute(settings, r"^max_tokens = \d+", "max_tokens = 16")
    substitute(tasks / "repofix" / "public" / "harness" / "harness.toml",
               r"^max_steps = \d+", "max_steps = 1")
    substitute(tasks / "repofix" / "reference_harness" / "harness.toml",
               r"^samples = \d+", "samples = 1")
    return tasks / task_id


@pytest.fixture(scope="module")
def smol_pack(episode_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    task_dir = cut_down(tmp_path_factory.mktemp("smol"), "repofix-smol")
    prepare_task(load_task(task_dir))
    return task_dir


def test_a_noop_episode_of_repofix_smol_gains_exactly_zero(smol_pack: Path,
                                                           tmp_path: Path) -> None:
    record, _ = run_episode(RunOptions(task=str(smol_pack), agent="noop", out=tmp_path,
                                       budget_minutes=10))
    assert record.submitted and record.gain == 0.0
    assert record.final_test == record.initial_test is not None


def test_a_reference_episode_of_repofix_smol_runs_to_a_scored_submission(
        smol_pack: Path, tmp_path: Path) -> None:
    record, _ = run_episode(RunOptions(task=str(smol_pack), agent="reference", out=tmp_path,
                                       budget_minutes=40))
    assert record.status == "finished" and record.submitted
    assert record.final_test is not None and record.validations_used >= 2


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("hf-home")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
            patch.delenv(name, raising=False)
        patch.setenv("HF_HOME", str(home))
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield home / "hub"


def test_repofix_prepares_and_a_noop_episode_gains_zero_on_a_hub_base_of_another_vocabulary(
        episode_home: Path, hf_cache: Path, tmp_path_factory: pytest.TempPathFactory,
        tmp_path: Path) -> None:
    checkpoint = tmp_path_factory.mktemp("qwen2") / "checkpoint"
    save_bpe_qwen2(checkpoint)
    cache_snapshot(hf_cache, REPO, checkpoint)
    task_dir = cut_down(tmp_path_factory.mktemp("full"), "repofix")
    substitute(task_dir / "task.toml", r'^base_model = ".*"$', f'base_model = "{REPO}"')
    substitute(task_dir / "task.toml", r"^gpus = 1$", "gpus = 0")
    substitute(task_dir / "public" / "trainer" / "config.toml", r'^precision = "bf16"',
               'precision = "fp32"')
    prepare_task(load_task(task_dir))
    record, _ = run_episode(RunOptions(task=str(task_dir), agent="noop", out=tmp_path,
                                       budget_minutes=5))
    assert record.submitted and record.gain == 0.0
    assert record.final_test == record.initial_test is not None
