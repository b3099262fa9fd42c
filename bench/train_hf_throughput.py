"""Tokens/s and MFU of the trl trainer (tasks/_hf/trainer) beside a raw PyTorch loop.

Both train the same model on the same prompt/completion rows with the same trainer settings
(batch, rows per forward pass, max_length, packing, gradient checkpointing, compile), device and
precision (float32 on the CPU, bf16 autocast on a GPU), AdamW (fused on a GPU, as the Trainer
there) and clipping; each round runs every training once, in turn, so competing load hits all
alike; the first ``--warmup`` steps of a run are not timed. Tokens are non-padding tokens;
"padding" is the share of the positions computed that are padding. A step's time is split into
the batch (building and moving it; in the trainer also its logging), forward + backward (with
clipping) and the optimiser, by CUDA events on a GPU (the GPU's timeline: time it waits for the
host counts in the phase that kept it waiting). "whole" is the trainer's tokens/s over all of
``train()``, start-up included, as its train_log.json counts them.

``--packing``: the trainer packs rows into sequences of ``--max-length`` tokens as trl does
(best fit; a batch is flattened into one sequence whose rows attend only to themselves); the
raw loop lays all rows end to end and cuts full sequences, attending causally over each, the
plain pretraining loop's best case. ``--packing-strategy wrapped`` has the trainer pack as
the raw loop does (its ``packing_strategy`` setting): a forward pass is then micro-batch ×
max-length with plain causal attention, whatever the micro-batch.

MFU = tokens/s × FLOPs per token ÷ peak; FLOPs per token = 6 × (weights of every matmul, the LM
head included) + 12 × layers × hidden × context (the mean row length; a full raw sequence's
length), not discounted for the causal mask nor counting checkpointing's second forward. The
peak is ``--peak-tflops``, else a known GPU's bf16 dense datasheet value, else (CPU) a float32
1024² matmul measured here on the same threads.

``--task NAME`` times what ``vtbench prepare`` trains for a task on the trl trainer (humaneval,
bfcl, shell, ...): its initial and reference systems (their data and config.toml; only the
steps are the bench's) on the task's base model (``--shape``: a random one with the character
tokenizer), each beside the raw loop on the same rows and settings, then the raw loop on full
sequences of ``--max-length`` (default 1,024) at the initial batch. Down the table: short rows
(tokens per step), padding, the trainer's own time, start-up ("whole"). ``prepare`` also runs
two trainings side by side on one GPU, which this does not.

Usage: python bench/train_hf_throughput.py [--shape tiny|smol|qwen2-1.5b] [--base DIR]
    [--task NAME] [--steps N] [--batch N] [--micro-batch N] [--length CHARS]
    [--max-length TOKENS] [--packing] [--packing-strategy bfd|wrapped] [--checkpointing]
    [--compile]
The tiny shape on the CPU finishes in about a minute; smol and qwen2-1.5b (Qwen2-1.5B's shape,
random init, no download) are for a GPU, and qwen2-1.5b is refused on the CPU. Full scale
(a few minutes on one H100; trl attends a packed pass through one mask over the whole
flattened pass, batch × max_length square, so compare --micro-batch 1):
  python bench/train_hf_throughput.py --shape qwen2-1.5b --packing --max-length 2048
      --length 1024 --checkpointing --batch 8 --steps 20
  (and with --packing-strategy wrapped --micro-batch 8: both loops on 8 × 2,048 tokens a pass)
A task's own trainings: python bench/train_hf_throughput.py --task humaneval --steps 50
"""

import argparse
import gc
import importlib.util
import json
import random
import statistics
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers.utils import logging as hf_logging

from vtbench.models.tokenizer import build_char_tokenizer

TRAINER = Path(__file__).resolve().parents[1] / "tasks" / "_hf" / "trainer"
"""Found beside this file, not through the task registry: without ``--task`` the bench needs
nothing of vtbench but the tokenizer, so it runs on a GPU host that has only the training
libraries."""
SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {"model_type": "llama", "hidden_size": 128, "intermediate_size": 512,
             "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
             "vocab_size": 0},
    "smol": {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
             "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
             "vocab_size": 49152},
    "qwen2-1.5b": {"model_type": "qwen2", "hidden_size": 1536, "intermediate_size": 8960,
                   "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
                   "vocab_size": 151936, "rms_norm_eps": 1e-6, "use_sliding_window": False},
}
"""Model shapes (embeddings tied in all); vocab_size 0 means the character tokenizer's own
size. qwen2-1.5b is Qwen2-1.5B's config.json: Qwen2Config's defaults are a 7B model's."""
GPU_ONLY = {"qwen2-1.5b"}
"""Shapes refused on the CPU, where one of their steps takes minutes."""
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0}
PHASES = ("batch", "forward+backward", "optimizer")
HEADER = (f"{'':34} {'tokens/s':>9} {'MFU':>6} {'step ms':>8} {'tok/step':>8} {'padding':>7} "
          f"{'batch':>6} {'fwd+bwd':>7} {'optim':>6} {'whole':>8} {'GiB':>5}  runs")
"""Columns of a row (:func:`table_row`); batch, fwd+bwd and optim are milliseconds a step."""


@dataclass
class Case:
    """One training to time: its loop ("trl", the trainer, or "raw", the plain loop), its
    settings as tasks/_hf/trainer/config.toml names them, and its folder of *.jsonl rows."""
    label: str
    loop: str
    config: dict[str, Any]
    data: Path


@dataclass
class Run:
    """What one training measured: non-padding tokens, seconds and seconds per phase of the
    timed steps; non-padding tokens (real) and positions of all steps, for the padding share;
    the trainer's tokens/s over all of ``train()`` (whole); peak GPU memory."""
    tokens: int = 0
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    real: int = 0
    positions: int = 0
    whole: float | None = None
    peak_gib: float | None = None

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds


class Laps:
    """Seconds per phase between consecutive laps, once started: CUDA events on a GPU,
    the wall clock on the CPU."""

    def __init__(self, device: str) -> None:
        self.device, self.on = device, False
        self.stamps: list[tuple[str | None, Any]] = []

    def start(self) -> None:
        self.on = True
        self.stamps.append((None, self._stamp()))

    def lap(self, phase: str) -> None:
        """Ends ``phase`` here (nothing before :meth:`start`)."""
        if self.on:
            self.stamps.append((phase, self._stamp()))

    def _stamp(self) -> Any:
        if self.device != "cuda":
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self) -> dict[str, float]:
        synchronize(self.device)
        totals = dict.fromkeys(PHASES, 0.0)
        for (_, before), (phase, after) in zip(self.stamps, self.stamps[1:], strict=False):
            if phase is not None:
                gone = (before.elapsed_time(after) / 1e3 if self.device == "cuda"
                        else after - before)
                totals[phase] += gone
        return totals


def random_base(shape: str, folder: Path, device: str) -> Path:
    from transformers import AutoConfig, AutoModelForCausalLM

    tokenizer = build_char_tokenizer()
    sizes = dict(SHAPES[shape])
    sizes["vocab_size"] = sizes["vocab_size"] or len(tokenizer)
    config = AutoConfig.for_model(
        sizes.pop("model_type"), **sizes, max_position_embeddings=32768,
        tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device(device):  # a 1.5B model initialises in seconds on a GPU
        model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    del model
    release(device)
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


def timing(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the bench sets in every training: its steps, one process, compiled or
    not."""
    steps = args.warmup + args.steps
    return {"steps": steps, "log_every": steps, "processes": 1, "compile": args.compile}


def synthetic_cases(folder: Path, args: argparse.Namespace) -> list[Case]:
    data = folder / "data"
    data.mkdir()
    rows = synthetic_rows(max(512, 4 * args.batch), args.length)
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tomllib.loads((TRAINER / "config.toml").read_text()) | timing(args) | {
        "batch_size": args.batch, "micro_batch_size": args.micro_batch, "lr": args.lr,
        "schedule": "constant", "warmup_steps": 0, "max_length": args.max_length,
        "completion_only_loss": True, "packing": args.packing,
        "packing_strategy": args.packing_strategy, "gradient_checkpointing": args.checkpointing}
    return [Case("trl trainer", "trl", config, data), Case("raw loop", "raw", config, data)]


def task_cases(train, name: str, folder: Path, args: argparse.Namespace
               ) -> tuple[list[Case], str]:
    """The initial and reference trainings of task ``name`` in both loops, the raw loop on
    full sequences, and the task's base model."""
    from vtbench.errors import VtbenchError
    from vtbench.tasks.materialize import apply_reference, materialize
    from vtbench.tasks.registry import find_task

    try:
        task = find_task(name)
    except VtbenchError as err:
        raise SystemExit(f"train_hf_throughput.py: {err.one_line()}") from None
    if not any((task.root / s).resolve() == TRAINER for s in task.spec.components.trainer.sources):
        raise SystemExit(f"train_hf_throughput.py: task {name} does not train with {TRAINER}")
    cases = []
    for system in ("initial", "reference"):
        root = folder / system
        materialize(task, root, ("data", "trainer"))
        if system == "reference":
            apply_reference(task, root, ("data", "trainer"))
        config = train.read_config(root / "trainer" / "config.toml") | timing(args)
        cases += [Case(f"{system}: trl trainer", "trl", config, root / "data"),
                  Case(f"{system}: raw loop", "raw", config, root / "data")]
    full = cases[0].config | {"packing": True, "max_length": args.max_length or 1024}
    cases.append(Case(f"raw loop, full rows ({full['batch_size']} × {full['max_length']})",
                      "raw", full, cases[0].data))
    return cases, task.spec.base_model


def passes(config: dict[str, Any]) -> tuple[int, int]:
    """Rows per forward pass and forward passes per step (one process)."""
    rows = config["micro_batch_size"] or config["batch_size"]
    return rows, max(1, config["batch_size"] // rows)


def raw_model(base: Path, config: dict[str, Any], device: str):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).to(device).train()
    model.config.use_cache = False
    if config["gradient_checkpointing"]:  # named activation_ from transformers 5.2x on
        enable = (getattr(model, "activation_checkpointing_enable", None)
                  or model.gradient_checkpointing_enable)
        enable({"use_reentrant": False})
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"],
                                  weight_decay=config["weight_decay"], fused=device == "cuda")
    if config["compile"]:
        model.compile()
    return model, optimizer


def raw_loop(base: Path, examples: list[dict], config: dict[str, Any],
             args: argparse.Namespace, device: str) -> Run:
    """The minimal loop on the rows ``train.encode`` made."""
    model, optimizer = raw_model(base, config, device)
    draw, (_, count) = batch_source(examples, config), passes(config)
    run, laps, started = Run(), Laps(device), 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            synchronize(device)
            started = time.perf_counter()
            laps.start()
        micro = [draw() for _ in range(count)]
        for batch in micro:
            real = int(batch["attention_mask"].sum()) if "attention_mask" in batch \
                else batch["input_ids"].numel()
            run.real, run.positions = run.real + real, run.positions + batch["input_ids"].numel()
            run.tokens += real if step >= args.warmup else 0
        micro = [{name: t.to(device, non_blocking=True) for name, t in b.items()} for b in micro]
        laps.lap("batch")
        for batch in micro:
            with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
                loss = model(**batch).loss / count
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config["max_grad_norm"])
        laps.lap("forward+backward")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        laps.lap("optimizer")
    synchronize(device)
    run.seconds, run.phases = time.perf_counter() - started, laps.seconds()
    return run


def batch_source(examples: list[dict], config: dict[str, Any], seed: int = 0
                 ) -> Callable[[], dict[str, torch.Tensor]]:
    """Draws one forward pass: rows padded to the longest, as the trainer's collator pads
    them, or with packing, full sequences cut from all rows laid end to end."""
    rng, (rows, _) = random.Random(seed), passes(config)
    only = config["completion_only_loss"]
    if not config["packing"]:
        return lambda: pad(rng.sample(examples, rows), only)
    sequences = full_sequences(examples, config["max_length"], only)
    if len(sequences) < rows:
        raise SystemExit(f"train_hf_throughput.py: the rows make {len(sequences)} sequences of "
                         f"{config['max_length']} tokens, fewer than {rows}: pass more rows")
    return lambda: {name: torch.tensor([s[name] for s in rng.sample(sequences, rows)])
                    for name in ("input_ids", "labels")}


def full_sequences(examples: list[dict], length: int, only: bool) -> list[dict[str, list[int]]]:
    ids = [token for e in examples for token in e["input_ids"]]
    labels = [token if keep or not only else -100 for e in examples
              for token, keep in zip(e["input_ids"], e["completion_mask"], strict=True)]
    return [{"input_ids": ids[start:start + length], "labels": labels[start:start + length]}
            for start in range(0, len(ids) - length + 1, length)]


def pad(examples: list[dict], only: bool) -> dict[str, torch.Tensor]:
    width = max(len(e["input_ids"]) for e in examples)
    ids, attention, labels = [], [], []
    for e in examples:
        fill = width - len(e["input_ids"])
        ids.append(e["input_ids"] + [0] * fill)  # masked out, so any id pads
        attention.append([1] * len(e["input_ids"]) + [0] * fill)
        labels.append([t if m or not only else -100
                       for t, m in zip(e["input_ids"], e["completion_mask"], strict=True)]
                      + [-100] * fill)
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(attention),
            "labels": torch.tensor(labels)}


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def trl_trainer(train, base: Path, case: Case, args: argparse.Namespace, workdir: Path) -> Run:
    """The trl trainer in this process (one process, as the raw loop)."""
    from transformers import TrainerCallback

    trainer = train.build_trainer(base, case.data, 0, case.config, workdir)
    trainer.args.include_num_input_tokens_seen = "non_padding"
    device = trainer.args.device.type
    run, laps, marks = Run(), Laps(device), []
    first, last = args.warmup, args.warmup + args.steps

    class Timer(TrainerCallback):
        def on_step_begin(self, targs, state, control, **kwargs):
            laps.lap("batch")

        def on_pre_optimizer_step(self, targs, state, control, **kwargs):
            laps.lap("forward+backward")

        def on_step_end(self, targs, state, control, **kwargs):
            laps.lap("optimizer")
            if state.global_step in (first, last):
                synchronize(device)
                marks.append((time.perf_counter(), state.num_input_tokens_seen))
            if state.global_step == first:
                laps.start()

    trainer.add_callback(Timer())
    trainer.data_collator = counting(trainer.data_collator, run)
    started = time.perf_counter()
    trainer.train()
    run.whole = trainer.state.num_input_tokens_seen / (time.perf_counter() - started)
    (start, seen), (end, total) = marks
    run.tokens, run.seconds, run.phases = total - seen, end - start, laps.seconds()
    trainer.accelerator.free_memory()
    return run


def counting(collate: Callable[[list], dict], run: Run) -> Callable[[list], dict]:
    """``collate`` counting the positions of each batch and the padding among them."""
    def collate_and_count(features: list) -> dict:
        batch = collate(features)
        positions = batch["input_ids"].numel()
        run.positions += positions
        run.real += int(batch["attention_mask"].sum()) if "attention_mask" in batch else positions
        return batch

    return collate_and_count


def time_case(train, base: Path, case: Case, examples: list[dict],
              args: argparse.Namespace, workdir: Path) -> Run:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    run = (trl_trainer(train, base, case, args, workdir) if case.loop == "trl"
           else raw_loop(base, examples, case.config, args, device))
    if device == "cuda":
        run.peak_gib = torch.cuda.max_memory_allocated() / 2**30
    return run


def release(device: str) -> None:
    """Frees a finished model and optimiser (the trainer's hold cycles) before the next."""
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def matmul_shape(base: Path) -> tuple[int, int, int]:
    """Weights of every matmul (the LM head included), layers, hidden size."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(base)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return matmul, config.num_hidden_layers, config.hidden_size


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
                        help="random model shape (default: tiny on the CPU, smol on a GPU; "
                             "with --task, the task's own base model)")
    parser.add_argument("--base", type=Path, default=None, help="a checkpoint instead")
    parser.add_argument("--task", default=None,
                        help="time this task's initial and reference trainings instead")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per run (default: 20 on the CPU, 100 on a GPU)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per run (≥ 1)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=None,
                        help="rows per step (default: 8 on the CPU, 32 on a GPU)")
    parser.add_argument("--micro-batch", type=int, default=0,
                        help="rows per forward pass (default: the whole batch)")
    parser.add_argument("--length", type=int, default=None,
                        help="longest row in characters (default: 64 on the CPU, 512 on a GPU)")
    parser.add_argument("--max-length", type=int, default=None,
                        help="tokens per row, or per packed sequence (default: --length + 8; "
                             "with --task, the full rows' length, default 1024)")
    parser.add_argument("--packing", action="store_true",
                        help="pack rows into sequences of --max-length tokens")
    parser.add_argument("--packing-strategy", choices=("bfd", "wrapped"), default="bfd",
                        help="the trainer's packing: rows kept apart in one flattened pass "
                             "(bfd), or laid end to end and cut as the raw loop does (wrapped)")
    parser.add_argument("--checkpointing", action="store_true", help="gradient checkpointing")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the model in both loops (the trainer's compile)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--peak-tflops", type=float, default=None)
    args = parser.parse_args()
    if args.warmup < 1:
        parser.error("--warmup must be at least 1 (the first timed step starts after one)")
    return args


def defaults(args: argparse.Namespace, gpu: bool) -> None:
    if args.shape in GPU_ONLY and not gpu:
        raise SystemExit(f"train_hf_throughput.py: --shape {args.shape} needs a GPU (a step "
                         "takes minutes on a CPU); use --shape tiny here")
    args.steps = args.steps or (100 if gpu else 20)
    args.batch = args.batch or (32 if gpu else 8)
    args.length = args.length or (512 if gpu else 64)
    if not args.task:
        args.max_length = args.max_length or args.length + 8


def main() -> None:
    args = parse()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    defaults(args, device == "cuda")
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    spec = importlib.util.spec_from_file_location("bench_hf_trainer", TRAINER / "train.py")
    assert spec and spec.loader
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.task:
            cases, task_base = task_cases(train, args.task, folder, args)
        else:
            cases, task_base = synthetic_cases(folder, args), None
        base, model = choose_base(args, task_base, folder, device)
        examples = {case.label: encode_rows(train, base, case) for case in cases}
        per_token, peak = describe(args, base, model, device, cases, examples)
        runs = measure(train, base, cases, examples, args, folder, per_token, peak)
        summarise(cases, runs, per_token, peak, args.steps)


def measure(train, base: Path, cases: list[Case], examples: dict[str, list[dict]],
            args: argparse.Namespace, folder: Path, per_token: dict[str, float], peak: float
            ) -> dict[str, list[Run]]:
    """Every case once a round, each run's row printed as it ends; a case that runs out of
    GPU memory is left out of the later rounds."""
    runs: dict[str, list[Run]] = {case.label: [] for case in cases}
    failed: set[str] = set()
    for round_ in range(args.rounds):
        for index, case in enumerate(c for c in cases if c.label not in failed):
            try:
                run = time_case(train, base, case, examples[case.label], args,
                                folder / f"work{round_}-{index}")
            except torch.OutOfMemoryError:
                run = None
            release("cuda" if torch.cuda.is_available() else "cpu")  # the error's frames too
            if run is None:
                failed.add(case.label)
                print(f"{case.label}: out of GPU memory (a smaller --micro-batch needs less)")
                continue
            runs[case.label].append(run)
            print(table_row(f"{case.label} #{round_ + 1}", [run], per_token[case.label], peak,
                            args.steps), flush=True)
    return runs


def choose_base(args: argparse.Namespace, task_base: str | None, folder: Path,
                device: str) -> tuple[Path, str]:
    """The checkpoint to train and how to name it: --base, else a random --shape, else the
    task's base model, else the default random shape."""
    if args.base:
        return args.base, str(args.base)
    if task_base and not args.shape:
        from vtbench.errors import VtbenchError
        from vtbench.models.base import resolve_base

        try:
            return resolve_base(task_base), f"the task's base model {task_base}"
        except VtbenchError as err:
            raise SystemExit(f"train_hf_throughput.py: {err.one_line()}") from None
    shape = args.shape or ("smol" if device == "cuda" else "tiny")
    return random_base(shape, folder / "base", device), f"random {shape}"


def encode_rows(train, base: Path, case: Case) -> list[dict]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    return [train.encode(tokenizer, row, case.config["max_length"])
            for row in train.load_rows(case.data)]


def describe(args: argparse.Namespace, base: Path, model: str, device: str, cases: list[Case],
             examples: dict[str, list[dict]]) -> tuple[dict[str, float], float]:
    """Prints the device, model and each case's settings; FLOPs per token of each, and the
    peak FLOP/s."""
    matmul, layers, hidden = matmul_shape(base)
    peak, source = peak_flops(device, args.peak_tflops)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"device {name}; model {model} ({matmul / 1e6:.1f}M matmul weights); "
          f"peak {peak / 1e12:.3g} TFLOP/s ({source}); {args.steps} timed steps per run")
    per_token = {}
    for case in cases:
        c = case.config
        full = c["packing"] and (case.loop == "raw" or c.get("packing_strategy") == "wrapped")
        context = c["max_length"] if full else statistics.mean(
            len(e["input_ids"]) for e in examples[case.label])
        per_token[case.label] = 6 * matmul + 12 * layers * hidden * context
        rows, count = passes(c)
        print(f"  {case.label}: batch {c['batch_size']} ({count} pass(es) of {rows}) × "
              f"max_length {c['max_length']}, {packed(case)}, "
              f"checkpointing {'on' if c['gradient_checkpointing'] else 'off'}; attention "
              f"context {context:.0f} tokens; {per_token[case.label] / 1e6:.1f} MFLOP/token")
    print(HEADER, flush=True)
    return per_token, peak


def packed(case: Case) -> str:
    if not case.config["packing"]:
        return "padded"
    return "packed" if case.loop == "raw" else f"packed ({case.config['packing_strategy']})"


def summarise(cases: list[Case], runs: dict[str, list[Run]], per_token: dict[str, float],
              peak: float, steps: int) -> None:
    print(f"medians over the rounds:\n{HEADER}")
    for case in cases:
        done = runs[case.label]
        print(table_row(case.label, done, per_token[case.label], peak, steps) if done
              else f"{case.label:34} out of GPU memory")
    for case in cases:
        twin = case.label.replace("trl trainer", "raw loop")
        if case.loop == "trl" and runs[case.label] and runs.get(twin):
            ratio = median(runs[case.label], "rate") / median(runs[twin], "rate")
            print(f"{case.label} ÷ raw loop: {ratio:.3f}")


def median(runs: list[Run], name: str) -> float:
    return statistics.median(getattr(run, name) for run in runs)


def table_row(label: str, runs: list[Run], per_token: float, peak: float, steps: int) -> str:
    """tokens/s, MFU, step time, tokens per step, padding share, milliseconds per step in
    each phase, the trainer's whole-run tokens/s, peak GPU memory: medians over the runs."""
    rate = median(runs, "rate")
    step_ms = 1e3 * median(runs, "seconds") / steps
    padding = 1 - sum(r.real for r in runs) / sum(r.positions for r in runs)
    phases = [1e3 * statistics.median(r.phases[p] for r in runs) / steps for p in PHASES]
    whole = f"{median(runs, 'whole'):8.0f}" if runs[0].whole is not None else f"{'–':>8}"
    memory = f"{median(runs, 'peak_gib'):5.1f}" if runs[0].peak_gib is not None else f"{'–':>5}"
    return (f"{label:34} {rate:9.0f} {rate * per_token / peak:6.1%} {step_ms:8.1f} "
            f"{median(runs, 'tokens') / steps:8.0f} {padding:7.1%} {phases[0]:6.1f} "
            f"{phases[1]:7.1f} {phases[2]:6.1f} {whole} {memory}  "
            f"{[round(r.rate) for r in runs]}")


if __name__ == "__main__":
    main()
