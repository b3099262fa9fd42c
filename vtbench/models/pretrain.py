"""Pre-training of the shared tiny base model.

Deterministic from its seed on one thread: the same seed, steps and versions give the same
weights. Trains in float32 and stores bfloat16 (half the size; fine-tuning loads it back as
float32). Writes an ordinary HF checkpoint plus ``training_record.json`` (data mix, steps,
loss curve, versions, CPU-seconds).
"""

import itertools
import json
import math
import platform
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vtbench.models.corpus import MIX, documents
from vtbench.models.tiny import TINY_ARCHITECTURE, new_tiny_model, save_checkpoint
from vtbench.models.tokenizer import build_char_tokenizer


def packed_batches(seed: int, batch_size: int, length: int) -> Iterator[list[list[int]]]:
    """Rows of exactly ``length`` tokens filled with whole documents (bos ... eos)."""
    tokenizer = build_char_tokenizer()
    stream = documents(seed)
    pending: list[int] = []
    while True:
        rows = []
        for _ in range(batch_size):
            while len(pending) < length:
                pending += [*tokenizer(next(stream)).input_ids, tokenizer.eos_token_id]
            rows.append(pending[:length])
            pending = pending[length:]
        yield rows


def learning_rate(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def pretrain(
    out: Path,
    steps: int,
    seed: int = 0,
    batch_size: int = 16,
    length: int = 256,
    peak_lr: float = 2e-3,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, object]:
    """Pre-train from scratch and save the checkpoint and its record to ``out``."""
    import torch
    import transformers

    torch.set_num_threads(1)
    model = new_tiny_model(seed)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=peak_lr, weight_decay=0.1,
                                  betas=(0.9, 0.95))
    losses: list[tuple[int, float]] = []
    started, cpu_started = time.time(), time.process_time()
    batches = packed_batches(seed, batch_size, length)
    for step, rows in enumerate(itertools.islice(batches, steps)):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, steps, peak_lr, warmup=min(200, steps // 10 + 1))
        ids = torch.tensor(rows)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 25 == 0 or step == steps - 1:
            losses.append((step, round(loss.item(), 4)))
        if on_step:
            on_step(step, loss.item())
    stored: Any = model
    save_checkpoint(stored.to(torch.bfloat16), out)
    record = {
        "kind": "pretraining",
        "seed": seed,
        "steps": steps,
        "batch_size": batch_size,
        "sequence_length": length,
        "tokens": steps * batch_size * length,
        "peak_lr": peak_lr,
        "data_mix": MIX,
        "architecture": TINY_ARCHITECTURE,
        "parameters": sum(p.numel() for p in model.parameters()),
        "stored_dtype": "bfloat16",
        "loss_curve": losses,
        "wall_seconds": round(time.time() - started, 1),
        "cpu_seconds": round(time.process_time() - cpu_started, 1),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__},
    }
    (out / "training_record.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
