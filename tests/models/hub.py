"""A Hugging Face hub cache built on disk, holding a random-init Qwen2 checkpoint with a
byte-level BPE vocabulary of its own (neither the tiny nor the smol one).

The layout is the one ``huggingface_hub`` writes and reads (``models--org--name/`` with
``blobs/`` named by content hash, ``snapshots/<commit>/`` of relative symlinks into them and
``refs/main``), so resolution is tested against the real lookup with the network off.
"""

import hashlib
import json
import os
from pathlib import Path

from vtbench import layout

EOS = "<|endoftext|>"
PAD = "<|pad|>"


def local_text(limit: int = 8000) -> list[str]:
    """A few KB of text from this repository: arith's public training rows."""
    lines, size = [], 0
    for line in (layout.BUILTIN_TASKS / "arith" / "public" / "data" / "train.jsonl").open():
        row = json.loads(line)
        lines.append(row["prompt"] + row["completion"])
        size += len(lines[-1])
        if size > limit:
            break
    return lines


def save_bpe_qwen2(folder: Path, vocab_size: int = 400, seed: int = 0) -> None:
    """A byte-level BPE trained on :func:`local_text` and a random Qwen2 (hidden 64, 2 layers)
    over its vocabulary, saved by transformers (safetensors) into ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(local_text(), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOS, PAD], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS, pad_token=PAD)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, tie_word_embeddings=True,
                         bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    Qwen2ForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)


def repo_folder(cache: Path, repo: str) -> Path:
    return cache / ("models--" + repo.replace("/", "--"))


def cache_snapshot(cache: Path, repo: str, checkpoint: Path, commit: str | None = None,
                   ref: str | None = "main") -> Path:
    """Put the files of ``checkpoint`` into ``cache`` as the snapshot ``commit`` of ``repo``
    (by default a hash of their contents), ``ref`` pointing at it; the snapshot folder."""
    files = sorted(p for p in checkpoint.rglob("*") if p.is_file())
    if commit is None:
        whole = hashlib.sha1()
        for path in files:
            whole.update(path.read_bytes())
        commit = whole.hexdigest()
    repo_root = repo_folder(cache, repo)
    snapshot = repo_root / "snapshots" / commit
    (repo_root / "blobs").mkdir(parents=True, exist_ok=True)
    for path in files:
        content = path.read_bytes()
        blob = repo_root / "blobs" / hashlib.sha256(content).hexdigest()
        blob.write_bytes(content)
        link = snapshot / path.relative_to(checkpoint)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if ref is not None:
        (repo_root / "refs").mkdir(exist_ok=True)
        (repo_root / "refs" / ref).write_text(commit)
    return snapshot
