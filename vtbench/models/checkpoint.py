"""The one way the project loads model weights that it did not write itself.

Candidates come from the untrusted research sandbox, so a checkpoint directory is
inspected before anything in it is opened by transformers. Guarantees of
:func:`load_checkpoint` and :func:`load_tokenizer`:

- the directory holds ``config.json`` and at least one ``*.safetensors`` file;
- no file in it is a pickle format (``*.bin``, ``*.pt``, ``*.pth``, ``*.pkl``, ``*.ckpt``, ...),
  so nothing is ever unpickled;
- nothing in it is a symlink, and no name (including the shards named by a
  ``*.safetensors.index.json``) leaves the directory; the one exception is a base model in
  the operator's Hugging Face cache (``links_into``), whose snapshot is made of symlinks
  into its repository's ``blobs/``: those are followed there and nowhere else;
- no config asks for remote code (``auto_map``, ``trust_remote_code``), and transformers
  is called with ``trust_remote_code=False``, ``use_safetensors=True`` and
  ``local_files_only=True``, so no code and no file is fetched;
- every safetensors header parses and its tensors lie inside the file, so a truncated or
  corrupt file is one :class:`CheckpointError` naming the file, never a traceback;
- :func:`load_checkpoint` also checks, before any weight is allocated, that the weights
  cover the config: every parameter of the model ``config.json`` describes is in a
  safetensors header with that shape. Otherwise transformers would initialise what is
  missing, and a small candidate could ask for gigabytes (an ``intermediate_size`` of
  150000 with the MLP tensors left out).

What it trusts: the installed transformers/safetensors libraries and the JSON and
tokenizer files (data, not code; chat templates render in jinja's sandbox).
"""

import contextlib
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from vtbench.errors import CheckpointError

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

PICKLE_SUFFIXES = frozenset({".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy",
                             ".npz"})
REMOTE_CODE_KEYS = ("auto_map", "trust_remote_code", "custom_pipelines")
CONFIG_FILES = ("config.json", "tokenizer_config.json", "generation_config.json")
ASYNC_LOAD_OFF = "HF_DEACTIVATE_ASYNC_LOAD"
_HEADER_LIMIT = 100_000_000
SYNC_LOAD_BYTES = 256 * 2**20
"""Weights smaller than this load on the calling thread: for a small checkpoint
transformers' loader threads cost more than they save (~15 ms of a tiny model's start)."""


def check_checkpoint(directory: Path, links_into: Path | None = None) -> Path:
    """Inspect ``directory`` and return it resolved; raise :class:`CheckpointError` if unsafe.

    ``links_into`` (trusted callers only: the operator's hub cache) admits symlinks to
    regular files inside that folder."""
    root = Path(directory)
    if not root.is_dir():
        raise CheckpointError(f"{root}: not a checkpoint directory (missing)",
                              hint="pass a directory with config.json and *.safetensors")
    root = root.resolve()
    files = _walk(root, links_into.resolve() if links_into is not None else None)
    names = {path.relative_to(root).as_posix() for path in files}
    for path in files:
        if path.suffix.lower() in PICKLE_SUFFIXES:
            raise CheckpointError(f"{path}: pickle-format weights are refused",
                                  hint="save with safe_serialization=True (safetensors only)")
    if "config.json" not in names:
        raise CheckpointError(f"{root / 'config.json'}: missing", hint="save the model config")
    weights = sorted(path for path in files if path.suffix == ".safetensors")
    if not weights:
        raise CheckpointError(f"{root}: no *.safetensors weights",
                              hint="save with safe_serialization=True")
    for name in CONFIG_FILES:
        if name in names:
            _check_config(root / name)
    for index in (path for path in files if path.name.endswith(".safetensors.index.json")):
        _check_index(root, index, names)
    for path in weights:
        _check_safetensors(path)
    return root


def load_checkpoint(directory: Path, device: str = "cpu",
                    dtype: "torch.dtype | None" = None) -> "PreTrainedModel":
    """The causal LM in ``directory`` on ``device`` in eval mode, after :func:`check_checkpoint`.

    ``dtype`` defaults to float32 on the CPU and bfloat16 on CUDA.
    """
    import torch
    from transformers import AutoModelForCausalLM

    root = check_checkpoint(directory)
    if dtype is None:
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    weights = sum(path.stat().st_size for path in root.glob("*.safetensors"))
    try:
        config = check_weights_cover_config(root)
        with _loader_threads(weights >= SYNC_LOAD_BYTES):
            model = AutoModelForCausalLM.from_pretrained(
                root, config=config, trust_remote_code=False, use_safetensors=True,
                local_files_only=True, dtype=dtype,
            )
    except (OSError, ValueError, KeyError, RuntimeError, TypeError) as err:
        raise CheckpointError(f"{root}: cannot load model: {_first_line(err)}",
                              hint="check config.json against the weights") from err
    return cast(Any, model).to(device).eval()


def check_weights_cover_config(root: Path) -> "PretrainedConfig":
    """The config of the checked checkpoint ``root``, once its weights cover it.

    The model the config describes is built on the meta device (shapes, no memory) and
    each of its parameters (a tied group counts once) must be in a safetensors header with
    the same shape; no tensor is read. Layers are counted against the header first, so a
    config asking for a million layers is refused before a million modules are built.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(root, trust_remote_code=False, local_files_only=True)
    shapes = _header_shapes(root)
    layers = getattr(config.get_text_config(), "num_hidden_layers", 0) or 0
    if not isinstance(layers, int) or layers > len(shapes):
        raise CheckpointError(f"{root / 'config.json'}: asks for {layers} layers, the weights "
                              f"hold {len(shapes)} tensors", hint=_COVER_HINT)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    prefix = f"{skeleton.base_model_prefix}."
    groups: dict[int, list[tuple[str, list[int]]]] = {}
    for name, parameter in skeleton.named_parameters(remove_duplicate=False):
        groups.setdefault(id(parameter), []).append((name, list(parameter.shape)))
    uncovered = [names[0] for names in groups.values()
                 if not any(shapes.get(name, shapes.get(name.removeprefix(prefix))) == shape
                            for name, shape in names)]
    if uncovered:
        shown = ", ".join(f"{name} {shape}" for name, shape in uncovered[:3])
        raise CheckpointError(f"{root / 'config.json'}: the weights do not cover the config: "
                              f"{len(uncovered)} of its {len(groups)} parameters are missing or "
                              f"have another shape ({shown})", hint=_COVER_HINT)
    return config


_COVER_HINT = "save config.json and the weights together with save_pretrained"


def load_tokenizer(directory: Path) -> "PreTrainedTokenizerBase":
    """The tokenizer in ``directory``, after :func:`check_checkpoint`."""
    from transformers import AutoTokenizer

    root = check_checkpoint(directory)
    try:
        return AutoTokenizer.from_pretrained(root, trust_remote_code=False, local_files_only=True)
    except (OSError, ValueError, KeyError, RuntimeError, TypeError) as err:
        raise CheckpointError(f"{root}: cannot load tokenizer: {_first_line(err)}",
                              hint="save the tokenizer with save_pretrained") from err


@contextlib.contextmanager
def _loader_threads(wanted: bool) -> Iterator[None]:
    """transformers loads weights on worker threads unless ``HF_DEACTIVATE_ASYNC_LOAD``."""
    previous = os.environ.get(ASYNC_LOAD_OFF)
    if not wanted:
        os.environ[ASYNC_LOAD_OFF] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(ASYNC_LOAD_OFF, None)
        else:
            os.environ[ASYNC_LOAD_OFF] = previous


def _walk(root: Path, links_into: Path | None = None) -> list[Path]:
    """Every regular file under ``root``; symlinks (but those to a regular file inside
    ``links_into``) and special files are refused."""
    found: list[Path] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        for entry in sorted(folder.iterdir()):
            if entry.is_symlink():
                if links_into is not None and _links_to_file_in(entry, links_into):
                    found.append(entry)
                    continue
                raise CheckpointError(f"{entry}: symlinks are refused in a checkpoint",
                                      hint="copy the file into the directory")
            if entry.is_dir():
                pending.append(entry)
            elif entry.is_file():
                found.append(entry)
            else:
                raise CheckpointError(f"{entry}: not a regular file")
    return found


def _links_to_file_in(link: Path, folder: Path) -> bool:
    target = link.resolve()
    return target.is_relative_to(folder) and target.is_file()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: not valid JSON ({_first_line(err)})") from err


def _check_config(path: Path) -> None:
    config = _read_json(path)
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    for key in REMOTE_CODE_KEYS:
        if _contains_key(config, key):
            raise CheckpointError(f"{path}: '{key}' asks for remote code, which is refused",
                                  hint=f"remove '{key}'; only built-in transformers classes load")


def _contains_key(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_contains_key(item, key) for item in value.values())
    if isinstance(value, list):
        return any(_contains_key(item, key) for item in value)
    return False


def _check_index(root: Path, index: Path, names: set[str]) -> None:
    weight_map = _read_json(index).get("weight_map", {})
    if not isinstance(weight_map, dict):
        raise CheckpointError(f"{index}: 'weight_map' must be an object")
    for shard in set(weight_map.values()):
        if not isinstance(shard, str) or shard not in names or "/" in shard:
            raise CheckpointError(f"{index}: shard {shard!r} is not a file of the checkpoint")


def _header_shapes(root: Path) -> dict[str, list[int]]:
    """Every tensor's shape, by name, from the headers of the checkpoint's safetensors."""
    shapes: dict[str, list[int]] = {}
    for path in sorted(root.rglob("*.safetensors")):
        for name, info in _check_safetensors(path).items():
            shape = info.get("shape")
            if isinstance(shape, list):
                shapes[name] = shape
    return shapes


def _check_safetensors(path: Path) -> dict[str, Any]:
    """Parse the header and check every tensor's byte range lies inside the file; the
    header's tensor entries, by name."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise CheckpointError(f"{path}: corrupt safetensors file (too short)")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(size - 8, _HEADER_LIMIT):
            raise CheckpointError(f"{path}: corrupt safetensors file (bad header length)")
        try:
            header = json.loads(handle.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CheckpointError(f"{path}: corrupt safetensors file (bad header)") from err
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors file (bad header)")
    data = size - 8 - length
    header.pop("__metadata__", None)
    for name, info in header.items():
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not 0 <= offsets[0] <= offsets[1] <= data):
            raise CheckpointError(f"{path}: corrupt safetensors file (tensor {name!r} "
                                  "lies outside the file)")
    return header


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:300]
