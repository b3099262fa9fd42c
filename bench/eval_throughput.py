"""Evaluation throughput ÷ direct batched ``generate`` of the same completions, one run.

The evaluation pipeline (model server + harness in its bwrap sandbox + scorer) scores N
arith items with a model; the baseline generates the same greedy completions in this
process with ``model.generate`` on batches of the same size. Both use one torch thread.
Prints instances/s of each, the ratio end to end (server start included) and for the
harness phase alone, and how many completions agree.

    python bench/eval_throughput.py --model models/tiny-base --items 2000
"""

import argparse
import random
import time
from pathlib import Path

import torch

from vtbench.evaluation import evaluate
from vtbench.models.checkpoint import load_checkpoint, load_tokenizer
from vtbench.tasks import find_task


def direct(model_dir: Path, prompts: list[str], max_tokens: int, batch: int) -> list[str]:
    model, tokenizer = load_checkpoint(model_dir, "cpu"), load_tokenizer(model_dir)
    texts = []
    for start in range(0, len(prompts), batch):
        encoded = tokenizer(prompts[start:start + batch], return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(**encoded, max_new_tokens=max_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)
        for row in out[:, encoded.input_ids.shape[1]:]:
            texts.append(tokenizer.decode(row, skip_special_tokens=True).split("\n")[0].strip())
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Path("models/tiny-base"))
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = find_task("arith")
    rows = task.builder.build_split(random.Random(0), args.items, set())
    items = [{"id": f"bench-{i:05d}", **row} for i, row in enumerate(rows)]
    settings = task.spec.components.harness.decoding
    prompts = [task.builder.PROMPT.format(**item["input"]) for item in items]
    started = time.perf_counter()
    baseline = direct(args.model, prompts, settings.max_tokens, args.batch)
    direct_seconds = time.perf_counter() - started
    started = time.perf_counter()
    result = evaluate(task, args.model, "val", items=items)
    eval_seconds = time.perf_counter() - started
    agree = sum(a == (i.output or "") for a, i in zip(baseline, result.instances, strict=True))
    n = len(items)
    print(f"direct generate: {n / direct_seconds:.1f} instances/s ({direct_seconds:.1f} s)")
    print(f"vtbench eval:    {n / eval_seconds:.1f} instances/s ({eval_seconds:.1f} s; "
          f"server start {result.timings['server_start']:.1f} s, "
          f"harness {result.timings['harness']:.1f} s)")
    print(f"ratio end to end: {direct_seconds / eval_seconds:.3f}; "
          f"harness phase only: {direct_seconds / result.timings['harness']:.3f} (goal >= 0.9)")
    print(f"identical completions: {agree}/{n}")


if __name__ == "__main__":
    main()
