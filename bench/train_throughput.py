"""Tokens/s of the default tiny trainer ÷ a minimal raw PyTorch loop, in one run.

Both train the same tiny model on the same arith rows with the same batch size, one
thread each, alternating A B A B so that competing load hits both alike; the ratio of the
medians is printed. Usage: python bench/train_throughput.py [--steps 30] [--rounds 3]
"""

import argparse
import random
import statistics
import tempfile
import time
import tomllib
from pathlib import Path

import torch

from vtbench import layout
from vtbench.models.tiny import new_tiny_model, save_checkpoint
from vtbench.tasks.registry import import_file

TRAINER = layout.BUILTIN_TASKS / "_tiny" / "trainer"


def raw_loop(base: Path, rows: list[dict], steps: int, batch_size: int, lr: float) -> float:
    """The minimal loop: tokenize, pad, forward, backward, AdamW. Returns tokens/s."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    rng, tokens, started = random.Random(0), 0, time.perf_counter()
    for _ in range(steps):
        batch = rng.sample(rows, batch_size)
        encoded = tokenizer([r["prompt"] + r["completion"] for r in batch], padding=True,
                            return_tensors="pt")
        labels = encoded.input_ids.masked_fill(encoded.attention_mask == 0, -100)
        model(**encoded, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        tokens += int(encoded.attention_mask.sum())
    return tokens / (time.perf_counter() - started)


def our_trainer(trainer, base: Path, data: Path, out: Path, steps: int) -> float:
    config = tomllib.loads((TRAINER / "config.toml").read_text()) | {"steps": steps}
    log = trainer.train(base, data, out, seed=0, config=config)
    return log["tokens_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    trainer = import_file(TRAINER / "train.py", "bench_trainer")
    data = layout.BUILTIN_TASKS / "arith" / "public" / "data"
    rows = trainer.load_rows(data)
    config = tomllib.loads((TRAINER / "config.toml").read_text())
    ours, raw = [], []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        save_checkpoint(new_tiny_model(seed=0), base)
        for round_ in range(args.rounds):
            ours.append(our_trainer(trainer, base, data, Path(tmp) / f"out{round_}", args.steps))
            raw.append(raw_loop(base, rows, args.steps, config["batch_size"], config["lr"]))
    ratio = statistics.median(ours) / statistics.median(raw)
    print(f"our trainer: {statistics.median(ours):.0f} tokens/s (runs: {ours})")
    print(f"raw loop:    {statistics.median(raw):.0f} tokens/s (runs: {raw})")
    print(f"ratio: {ratio:.3f}  (goal >= 0.95)")


if __name__ == "__main__":
    main()
