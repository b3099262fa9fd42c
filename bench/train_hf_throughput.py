"""Tokens/s of the trl trainer (tasks/_hf/trainer) ÷ a raw PyTorch loop, and its MFU.

Both train the same randomly initialised Llama on the same synthetic prompt/completion rows
with the same batch size, device and precision (float32 on the CPU, bf16 autocast on a
GPU), completion-only loss, AdamW and gradient clipping; rounds alternate A B A B so that
competing load hits both alike, and the first ``--warmup`` steps of each run are not timed.
Tokens are the rows' non-padding tokens. MFU = tokens/s × FLOPs per token ÷ peak, with
FLOPs per token = 6 × (weights of every matmul, the LM head included) + 12 × layers ×
hidden × mean row length (attention, not discounted for the causal mask); the peak is
``--peak-tflops``, else the bf16 dense datasheet value of a known GPU, else (CPU) the rate of
a large float32 matmul measured here on the same threads.

Usage: python bench/train_hf_throughput.py [--shape tiny|smol] [--base DIR] [--steps N]
The tiny shape on the CPU finishes in under a minute; ``--shape smol`` is SmolLM2-135M's
shape (for a GPU).
"""

import argparse
import importlib.util
import json
import random
import statistics
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import torch
from transformers.utils import logging as hf_logging

from vtbench.models.tokenizer import build_char_tokenizer

TRAINER = Path(__file__).resolve().parents[1] / "tasks" / "_hf" / "trainer"
"""Found beside this file, not through the task registry: the bench needs nothing of vtbench
but the tokenizer, so it runs on a GPU host that has only the training libraries."""
SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 4,
             "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 0},
    "smol": {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
             "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152},
}
"""Model shapes; vocab_size 0 means the character tokenizer's own size."""
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0}


def random_base(shape: str, folder: Path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_char_tokenizer()
    sizes = dict(SHAPES[shape])
    sizes["vocab_size"] = sizes["vocab_size"] or len(tokenizer)
    config = LlamaConfig(**sizes, max_position_embeddings=2048, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def synthetic_rows(count: int, length: int, seed: int = 0) -> list[dict]:
    """Rows of printable text, each between half and all of ``length`` characters."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789 +-=()"
    rows = []
    for _ in range(count):
        size = rng.randint(length // 2, length - 2)
        text = "".join(rng.choice(letters) for _ in range(size))
        cut = rng.randint(size // 4, 3 * size // 4)
        rows.append({"prompt": text[:cut], "completion": text[cut:]})
    return rows


def raw_loop(base: Path, examples: list[dict], args: argparse.Namespace, device: str) -> float:
    """The minimal loop on the rows ``train.encode`` made; steady-state tokens/s."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    rng, tokens, started = random.Random(0), 0, 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            synchronize(device)
            tokens, started = 0, time.perf_counter()
        batch = pad([examples[i] for i in rng.sample(range(len(examples)), args.batch)])
        tokens += int(batch["attention_mask"].sum())
        batch = {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    synchronize(device)
    return tokens / (time.perf_counter() - started)


def pad(examples: list[dict]) -> dict[str, torch.Tensor]:
    width = max(len(e["input_ids"]) for e in examples)
    ids, attention, labels = [], [], []
    for e in examples:
        fill = width - len(e["input_ids"])
        ids.append(e["input_ids"] + [0] * fill)  # masked out, so any id pads
        attention.append([1] * len(e["input_ids"]) + [0] * fill)
        labels.append([t if m else -100 for t, m in zip(e["input_ids"], e["completion_mask"],
                                                         strict=True)] + [-100] * fill)
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(attention),
            "labels": torch.tensor(labels)}


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def trl_trainer(train, base: Path, data: Path, args: argparse.Namespace, workdir: Path) -> float:
    """The trl trainer in this process (one process, as the raw loop); steady-state tokens/s."""
    from transformers import TrainerCallback

    config = tomllib.loads((TRAINER / "config.toml").read_text()) | {
        "steps": args.warmup + args.steps, "batch_size": args.batch, "lr": args.lr,
        "schedule": "constant", "warmup_steps": 0, "max_length": args.length + 8,
        "processes": 1, "log_every": args.warmup + args.steps}
    marks: list[tuple[float, int]] = []

    class Timer(TrainerCallback):
        def on_step_end(self, targs, state, control, **kwargs):
            if state.global_step in (args.warmup, args.warmup + args.steps):
                synchronize(device)
                marks.append((time.perf_counter(), state.num_input_tokens_seen))

    trainer = train.build_trainer(base, data, 0, config, workdir)
    trainer.args.include_num_input_tokens_seen = "non_padding"
    trainer.add_callback(Timer())
    device = trainer.args.device.type
    trainer.train()
    (start, seen), (end, total) = marks
    return (total - seen) / (end - start)


def flops_per_token(base: Path, mean_length: float) -> float:
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(base)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return 6 * matmul + 12 * config.num_hidden_layers * config.hidden_size * mean_length


def peak_flops(device: str, given: float | None) -> tuple[float, str]:
    """FLOP/s to divide by, and where the number comes from."""
    if given:
        return given * 1e12, "given"
    if device == "cuda":
        name = torch.cuda.get_device_name()
        for gpu, tflops in PEAK_BF16_TFLOPS.items():
            if gpu in name:
                return tflops * 1e12, f"{gpu} bf16 dense datasheet"
        raise SystemExit(f"no datasheet peak for {name}: pass --peak-tflops")
    size = 1024
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    started, repeats = time.perf_counter(), 20
    for _ in range(repeats):
        a @ b
    rate = repeats * 2 * size**3 / (time.perf_counter() - started)
    return rate, f"measured float32 {size}² matmul, {torch.get_num_threads()} thread(s)"


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default=None,
                        help="random model shape (default: tiny on the CPU, smol on a GPU)")
    parser.add_argument("--base", type=Path, default=None, help="a checkpoint instead")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per run (default: 20 on the CPU, 100 on a GPU)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=None,
                        help="rows per step (default: 8 on the CPU, 32 on a GPU)")
    parser.add_argument("--length", type=int, default=None,
                        help="longest row in characters (default: 64 on the CPU, 512 on a GPU)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--peak-tflops", type=float, default=None)
    return parser.parse_args()


def main() -> None:
    args = parse()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = device == "cuda"
    args.shape = args.shape or ("smol" if gpu else "tiny")
    args.steps = args.steps or (100 if gpu else 20)
    args.batch = args.batch or (32 if gpu else 8)
    args.length = args.length or (512 if gpu else 64)
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    spec = importlib.util.spec_from_file_location("bench_hf_trainer", TRAINER / "train.py")
    assert spec and spec.loader
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.base or random_base(args.shape, Path(tmp) / "base")
        data = Path(tmp) / "data"
        data.mkdir()
        rows = synthetic_rows(max(512, 4 * args.batch), args.length)
        (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        tokenizer = build_char_tokenizer() if args.base is None else None
        examples = [train.encode(tokenizer or train_tokenizer(base), row, args.length + 8)
                    for row in rows]
        ours, raw = [], []
        for round_ in range(args.rounds):
            ours.append(trl_trainer(train, base, data, args, Path(tmp) / f"work{round_}"))
            raw.append(raw_loop(base, examples, args, device))
        report(args, base, examples, device, ours, raw)


def train_tokenizer(base: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base)


def report(args: argparse.Namespace, base: Path, examples: list[dict], device: str,
           ours: list[float], raw: list[float]) -> None:
    mean_length = statistics.mean(len(e["input_ids"]) for e in examples)
    per_token = flops_per_token(base, mean_length)
    peak, source = peak_flops(device, args.peak_tflops)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"device {name}; model {args.base or args.shape}; batch {args.batch}; "
          f"mean row {mean_length:.0f} tokens; {per_token / 1e6:.1f} MFLOP per token")
    for label, runs in (("trl trainer", ours), ("raw loop", raw)):
        rate = statistics.median(runs)
        print(f"{label:12} {rate:10.0f} tokens/s  MFU {rate * per_token / peak:6.1%}  "
              f"(runs: {[round(r) for r in runs]})")
    print(f"ratio trl / raw: {statistics.median(ours) / statistics.median(raw):.3f}")
    print(f"peak {peak / 1e9:.0f} GFLOP/s ({source})")


if __name__ == "__main__":
    main()
