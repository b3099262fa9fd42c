"""Where a task's base model comes from: ``tiny``, ``smol``, a local folder or a hub id.

- ``tiny`` is the released pre-trained checkpoint in the repository (``models/tiny-base``),
  unless ``vtbench pretrain --install`` has put a rebuilt one in the private store.
- ``smol`` is SmolLM2-135M, converted once into the private store (:mod:`.smol`).
- a folder (``/…``, ``~/…``, ``./…``; the spec makes a relative one absolute against its
  ``task.toml``) is used where it is.
- a hub id ``org/name[@revision]`` is the snapshot of that repository in the operator's
  Hugging Face cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
  ``~/.cache/huggingface/hub``), found by ``huggingface_hub`` with ``local_files_only``.

Guarantees: :func:`resolve_base` never touches the network; only :func:`download_base`
does, and only ``vtbench prepare --download`` calls it, on the operator's host (never in an
episode, never in a sandbox), fetching no pickle-format weights. A folder or hub snapshot
is returned only once :func:`vtbench.models.checkpoint.check_checkpoint` accepts it
(safetensors weights, no pickle file, no remote code); in a hub snapshot the symlinks the
cache is made of are followed only into that repository's ``blobs/``.
"""

import os
from collections.abc import Callable
from pathlib import Path

from vtbench import layout
from vtbench.errors import CheckpointError, NotPrepared, VtbenchError
from vtbench.models.checkpoint import PICKLE_SUFFIXES, check_checkpoint
from vtbench.spec import base_model_kind

SKIPPED_WEIGHTS = sorted(
    {f"*{suffix}" for suffix in PICKLE_SUFFIXES}
    | {"*.bin.index.json", "*.h5", "*.msgpack", "*.ot", "*.onnx", "*.onnx_data", "*.gguf",
       "*.tflite", "*.mlmodel"})
"""Files of a hub repository a download leaves out: pickles, and other frameworks' weights
(a repository may ship the same model as safetensors and in these formats)."""


class DownloadRefused(VtbenchError):
    """``vtbench prepare --download`` cannot fetch a base model here."""


def installed_tiny_base() -> Path:
    return layout.base_models() / "tiny"


def resolve_base(name: str) -> Path:
    """The folder of the base model ``name`` (a task's ``base_model``), checked."""
    kind = base_model_kind(name)
    if kind == "tiny":
        for candidate in (installed_tiny_base(), layout.RELEASED_BASE):
            if (candidate / "model.safetensors").exists():
                return candidate
        raise NotPrepared("the tiny base model is missing", hint="run: vtbench pretrain --install")
    if kind == "smol":
        from vtbench.models.smol import ensure_smol

        return ensure_smol()
    if kind == "hub":
        return hub_snapshot(name)
    path = Path(name).expanduser()
    if not (path / "config.json").exists():
        raise CheckpointError(f"base model {name!r}: no config.json there",
                              hint="name a local HF checkpoint folder or a hub id (org/name)")
    return check_checkpoint(path, links_into=_blobs_of(path))


def _blobs_of(folder: Path) -> Path | None:
    """The ``blobs/`` of a hub-cache snapshot named by its path (``…/models--org--name/
    snapshots/<commit>``), whose symlinks lead there; None for any other folder."""
    real = folder.resolve()
    repo = real.parent.parent
    if real.parent.name == "snapshots" and repo.name.startswith("models--"):
        return repo / "blobs"
    return None


def hub_cache() -> Path:
    """The operator's Hugging Face hub cache, read from the environment at each call (the
    ``huggingface_hub`` constants freeze it at import)."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    home = os.environ.get("HF_HOME") or os.path.join(xdg, "huggingface")
    return Path(home).expanduser() / "hub"


def split_hub_id(name: str) -> tuple[str, str | None]:
    """``org/name@revision`` as (repository, revision or None for the default branch)."""
    repo, _, revision = name.partition("@")
    return repo, revision or None


def repo_folder(repo: str) -> Path:
    """The cache folder of a model repository (``models--org--name``)."""
    return hub_cache() / ("models--" + repo.replace("/", "--"))


def hub_snapshot(name: str) -> Path:
    """The cached snapshot of hub id ``name``, checked; :class:`NotPrepared` naming the
    download when it is not cached. Never touches the network."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    repo, revision = split_hub_id(name)
    try:
        folder = snapshot_download(repo, revision=revision, cache_dir=hub_cache(),
                                   local_files_only=True, ignore_patterns=SKIPPED_WEIGHTS)
    except LocalEntryNotFoundError:
        pinned = f" --revision {revision}" if revision else ""
        raise NotPrepared(
            f"base model {name} is not in the Hugging Face cache ({hub_cache()})",
            hint=f"run: vtbench prepare --download --task <task>, or hf download {repo}{pinned} "
                 f"--exclude '*.bin' '*.pt' '*.pth'; a local folder is written ./{repo}",
        ) from None
    snapshot = Path(folder)
    pickled = sorted(path.name for path in snapshot.rglob("*")
                     if path.suffix.lower() in PICKLE_SUFFIXES)
    if pickled:
        raise CheckpointError(
            f"{snapshot}: pickle-format weights are refused ({', '.join(pickled[:3])})",
            hint=f"remove them from {snapshot} (its safetensors stay), or fetch the model "
                 "with vtbench prepare --download, which skips them")
    return check_checkpoint(snapshot, links_into=repo_folder(repo) / "blobs")


def download_base(name: str, report: Callable[[str], None] = lambda line: None) -> Path | None:
    """Fetch hub id ``name`` into the operator's cache unless it is there already (safetensors,
    configs and tokenizer files; no pickle). None for a base model that is not a hub id.
    Refused under ``HF_HUB_OFFLINE``, which the operator sets to keep a host off the hub."""
    if base_model_kind(name) != "hub":
        return None
    try:
        return hub_snapshot(name)
    except NotPrepared:
        pass
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise DownloadRefused(f"cannot download {name}: HF_HUB_OFFLINE is set",
                              hint="unset HF_HUB_OFFLINE on a host with network, or copy the "
                                   f"model into {hub_cache()} there")
    from huggingface_hub import snapshot_download

    repo, revision = split_hub_id(name)
    report(f"downloading {name} into {hub_cache()} (safetensors only)")
    try:
        snapshot_download(repo, revision=revision, cache_dir=hub_cache(),
                          ignore_patterns=SKIPPED_WEIGHTS)
    except OSError as err:  # huggingface_hub's HTTP and cache errors are OSErrors
        raise DownloadRefused(f"cannot download {name}: {str(err).splitlines()[0][:300]}",
                              hint="check the id, the network and HF_TOKEN for a gated "
                                   "model") from None
    return hub_snapshot(name)
