"""Base models named by folder or hub id: resolution through a Hugging Face cache built on
disk (the network is off: ``HF_HUB_OFFLINE=1``), the checks on what is found, and the digest
that covers it."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.models.hub import cache_snapshot, repo_folder, save_bpe_qwen2
from vtbench.errors import CheckpointError, NotPrepared, SpecError
from vtbench.models.base import DownloadRefused, download_base, resolve_base
from vtbench.prepare.digest import pack_digest
from vtbench.spec import load_spec
from vtbench.tasks import load_task

REPO = "vtbench-test/qwen2-bpe"


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("qwen2") / "checkpoint"
    save_bpe_qwen2(folder)
    return folder


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty operator's cache at ``$HF_HOME/hub``, with the hub switched off."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield tmp_path / "hf" / "hub"


def with_file(checkpoint: Path, target: Path, name: str, content: bytes) -> Path:
    shutil.copytree(checkpoint, target)
    (target / name).write_bytes(content)
    return target


def set_base(task: Path, base: str, scale: str = "tiny") -> None:
    toml = task / "task.toml"
    text = toml.read_text().replace('base_model = "tiny"', f'base_model = "{base}"')
    toml.write_text(text.replace('scale = "tiny"', f'scale = "{scale}"'))


def test_a_hub_id_resolves_to_its_snapshot_in_the_cache(hf_cache: Path, qwen2: Path) -> None:
    snapshot = cache_snapshot(hf_cache, REPO, qwen2)
    assert resolve_base(REPO) == snapshot.resolve()
    assert (resolve_base(REPO) / "model.safetensors").is_symlink()


def test_a_pinned_revision_resolves_to_that_snapshot_not_to_main(
        hf_cache: Path, qwen2: Path, tmp_path: Path) -> None:
    pinned = cache_snapshot(hf_cache, REPO, qwen2, commit="a" * 40, ref=None)
    newer = with_file(qwen2, tmp_path / "newer", "generation_config.json", b"{}")
    main = cache_snapshot(hf_cache, REPO, newer)
    assert resolve_base(f"{REPO}@{'a' * 40}") == pinned.resolve()
    assert resolve_base(REPO) == main.resolve() != pinned.resolve()


def test_an_uncached_hub_id_is_refused_in_one_line_naming_the_download(hf_cache: Path) -> None:
    with pytest.raises(NotPrepared) as err:
        resolve_base("vtbench-test/absent")
    line = err.value.one_line()
    assert "\n" not in line and "not in the Hugging Face cache" in line
    assert "vtbench prepare --download" in line and "hf download vtbench-test/absent" in line


def test_a_download_is_refused_while_the_hub_is_switched_off(hf_cache: Path) -> None:
    with pytest.raises(DownloadRefused, match="HF_HUB_OFFLINE is set"):
        download_base("vtbench-test/absent")
    assert not repo_folder(hf_cache, "vtbench-test/absent").exists()


def test_a_download_of_a_cached_model_fetches_nothing(hf_cache: Path, qwen2: Path) -> None:
    snapshot = cache_snapshot(hf_cache, REPO, qwen2)
    assert download_base(REPO) == snapshot.resolve()
    assert download_base("tiny") is None


def test_pickle_weights_in_a_snapshot_are_refused_with_the_fix(
        hf_cache: Path, qwen2: Path, tmp_path: Path) -> None:
    pickled = with_file(qwen2, tmp_path / "pickled", "pytorch_model.bin", b"\x80\x04pickle")
    cache_snapshot(hf_cache, REPO, pickled)
    with pytest.raises(CheckpointError, match="pickle-format weights are refused") as err:
        resolve_base(REPO)
    assert err.value.hint is not None and "--download" in err.value.hint


def test_a_snapshot_link_leaving_its_repository_is_refused(
        hf_cache: Path, qwen2: Path, tmp_path: Path) -> None:
    snapshot = cache_snapshot(hf_cache, REPO, qwen2)
    outside = tmp_path / "elsewhere.json"
    outside.write_text("{}")
    (snapshot / "extra.json").symlink_to(outside)
    with pytest.raises(CheckpointError, match="symlinks are refused"):
        resolve_base(REPO)


def test_a_local_folder_with_pickle_weights_is_refused(qwen2: Path, tmp_path: Path) -> None:
    folder = with_file(qwen2, tmp_path / "local", "pytorch_model.bin", b"\x80\x04pickle")
    with pytest.raises(CheckpointError, match="pickle-format weights are refused"):
        resolve_base(str(folder))
    (folder / "pytorch_model.bin").unlink()
    assert resolve_base(str(folder)) == folder.resolve()


def test_a_snapshot_folder_named_by_its_path_is_accepted(hf_cache: Path, qwen2: Path) -> None:
    snapshot = cache_snapshot(hf_cache, REPO, qwen2)
    assert resolve_base(str(snapshot)) == snapshot.resolve()


def test_a_relative_folder_is_read_against_its_task_toml(
        minimal_task: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_base(minimal_task, "./weights/qwen2", scale="full")
    monkeypatch.chdir(tmp_path)
    spec = load_spec(minimal_task / "task.toml")
    assert spec.base_model == str(minimal_task.resolve() / "weights" / "qwen2")


@pytest.mark.parametrize(("scale", "base", "reason"), [
    ("tiny", "gpt2", "'gpt2' is not tiny, smol, a folder"),
    ("tiny", "a/b/c", "or a hub id"),
    ("full", "tiny", "a full-scale task names its base model by folder or hub id"),
])
def test_a_base_model_of_no_known_form_is_refused_by_the_spec(
        minimal_task: Path, scale: str, base: str, reason: str) -> None:
    set_base(minimal_task, base, scale)
    with pytest.raises(SpecError, match=reason) as err:
        load_spec(minimal_task / "task.toml")
    assert "\n" not in str(err.value)


def test_the_pack_digest_follows_the_snapshot_the_hub_id_resolves_to(
        minimal_task: Path, hf_cache: Path, qwen2: Path, tmp_path: Path) -> None:
    set_base(minimal_task, REPO, scale="full")
    cache_snapshot(hf_cache, REPO, qwen2)
    task = load_task(minimal_task)
    first = pack_digest(task)
    assert pack_digest(task) == first
    retrained = tmp_path / "retrained"
    shutil.copytree(qwen2, retrained)
    weights = bytearray((retrained / "model.safetensors").read_bytes())
    weights[-1] ^= 0xFF
    (retrained / "model.safetensors").write_bytes(bytes(weights))
    cache_snapshot(hf_cache, REPO, retrained)
    assert pack_digest(task) != first
