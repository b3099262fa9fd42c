"""Fine-tune a causal language model on prompt/completion rows.

Usage: python trainer/train.py --base models/base --data data --out models/NAME [--seed 0]

Reads every *.jsonl file in --data (rows: {"prompt": ..., "completion": ...}), trains for
the settings in trainer/config.toml and saves an ordinary Hugging Face checkpoint
(safetensors) to --out, with train_log.json beside it. On a GPU it trains in bfloat16
autocast; on the CPU in float32 with $VTBENCH_THREADS threads.
"""

import argparse
import json
import math
import os
import random
import time
import tomllib
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging


def load_rows(data_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(data_dir.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and isinstance(row.get("prompt"), str) \
                    and isinstance(row.get("completion"), str):
                rows.append(row)
    return rows


def encode(tokenizer, row: dict, max_length: int) -> tuple[list[int], int]:
    """Token ids of prompt + completion + eos, and how many of them belong to the prompt."""
    prompt_ids = tokenizer(row["prompt"]).input_ids
    completion_ids = tokenizer(row["completion"], add_special_tokens=False).input_ids
    ids = (prompt_ids + completion_ids + [tokenizer.eos_token_id])[:max_length]
    return ids, min(len(prompt_ids), len(ids))


def loss_mask(prompt_length: int, length: int) -> list[int]:
    """Which positions of a row contribute to the loss (1) and which do not (0)."""
    return [1] * length


def make_batch(examples: list[tuple[list[int], int]], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(ids) for ids, _ in examples)
    input_ids, attention, labels = [], [], []
    for ids, prompt_length in examples:
        pad = width - len(ids)
        mask = loss_mask(prompt_length, len(ids))
        input_ids.append(ids + [pad_id] * pad)
        attention.append([1] * len(ids) + [0] * pad)
        labels.append([t if m else -100 for t, m in zip(ids, mask, strict=True)] + [-100] * pad)
    return {"input_ids": torch.tensor(input_ids), "attention_mask": torch.tensor(attention),
            "labels": torch.tensor(labels)}


def learning_rate(step: int, config: dict) -> float:
    peak, warmup, steps = config["lr"], config["warmup_steps"], config["steps"]
    if step < warmup:
        return peak * (step + 1) / warmup
    if config["schedule"] == "cosine":
        progress = (step - warmup) / max(1, steps - warmup)
        return peak * 0.5 * (1 + math.cos(math.pi * progress))
    return peak


def batches(examples: list, batch_size: int, rng: random.Random):
    """Endless shuffled passes over the examples."""
    while True:
        order = list(range(len(examples)))
        rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield [examples[i] for i in order[start:start + batch_size]]


def pick_device() -> str:
    """``$VTBENCH_DEVICE`` if set, else the GPU when there is one, else the CPU."""
    return os.environ.get("VTBENCH_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


def train(base: Path, data: Path, out: Path, seed: int, config: dict) -> dict:
    torch.manual_seed(seed)
    device = pick_device()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).to(device)
    model.train()
    examples = [encode(tokenizer, row, config["max_length"]) for row in load_rows(data)]
    if len(examples) < config["batch_size"]:
        raise SystemExit(f"train.py: only {len(examples)} usable rows in {data}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"],
                                  weight_decay=config["weight_decay"])
    losses, tokens, started = [], 0, time.time()
    stream = batches(examples, config["batch_size"], random.Random(seed))
    for step in range(config["steps"]):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config)
        batch = make_batch(next(stream), tokenizer.pad_token_id)
        batch = {name: tensor.to(device) for name, tensor in batch.items()}
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = model(**batch).loss
        if not math.isfinite(loss.item()):
            raise SystemExit(f"train.py: the loss is not finite at step {step + 1}: training "
                             "diverged (try a lower lr); no model was saved")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += int(batch["attention_mask"].sum())
        if step % 10 == 0 or step == config["steps"] - 1:
            losses.append([step, round(loss.item(), 4)])
            print(f"step {step + 1}/{config['steps']} loss {loss.item():.3f}", flush=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    seconds = time.time() - started
    log = {"rows": len(examples), "config": config, "seed": seed, "device": device,
           "loss_curve": losses,
           "tokens": tokens, "seconds": round(seconds, 1),
           "tokens_per_second": round(tokens / seconds, 1)}
    (out / "train_log.json").write_text(json.dumps(log, indent=2) + "\n")
    return log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="model to start from")
    parser.add_argument("--data", type=Path, default=Path("data"))
    parser.add_argument("--out", type=Path, required=True, help="where to save the model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", type=Path, default=Path(__file__).with_name("config.toml"))
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("VTBENCH_THREADS", "1")))
    hf_logging.disable_progress_bar()
    config = tomllib.loads(args.config.read_text())
    train(args.base, args.data, args.out, args.seed, config)


if __name__ == "__main__":
    main()
