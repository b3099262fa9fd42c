"""Fine-tune a causal language model on prompt/completion rows with trl's SFTTrainer.

Usage: python trainer/train.py --base models/base --data data --out models/NAME [--seed 0]

Reads every *.jsonl file in --data (rows: {"prompt": ..., "completion": ...}), trains for
the settings in trainer/config.toml and saves an ordinary Hugging Face checkpoint
(safetensors only; a LoRA adapter is merged back into the weights) to --out, with
train_log.json beside it.

Processes: with `processes` above 1 this script launches itself again under
`accelerate launch` (one process per GPU, DDP or FSDP; on a machine without a GPU, CPU
processes that talk over gloo) and waits for it, so the command that trains stays the same
on one CPU or on eight GPUs. Started by a launcher (torchrun, `accelerate launch`) with
several processes, it trains in place. On a GPU it trains in bfloat16 mixed precision
(precision = "bf16"); on the CPU in float32 with $VTBENCH_THREADS threads per process.

Rows are tokenized as the model server sees them: the prompt alone, then the completion,
then the end-of-sequence token. Packing keeps completion-only loss (trl builds the labels
before it packs) and packed rows do not attend to each other; it is off by default because
it changes what a step is: batch_size then counts packed sequences of max_length tokens.
"""

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "steps": 300, "batch_size": 16, "micro_batch_size": 0, "lr": 1e-4, "schedule": "cosine",
    "warmup_steps": 0, "weight_decay": 0.0, "max_grad_norm": 1.0, "max_length": 512,
    "completion_only_loss": True, "packing": False, "packing_strategy": "bfd",
    "precision": "bf16",
    "gradient_checkpointing": False, "compile": False, "processes": "auto",
    "distributed": "ddp",
    "log_every": 10,
    "lora": {"enabled": False, "r": 16, "alpha": 32, "dropout": 0.05,
             "target_modules": "all-linear"},
}
CHOICES = {"schedule": ("constant", "linear", "cosine"), "precision": ("bf16", "fp32"),
           "distributed": ("ddp", "fsdp"), "packing_strategy": ("bfd", "wrapped")}
LAUNCHED = "LOCAL_RANK"
"""Set by torchrun (and so by `accelerate launch`) in every process it starts."""


def fail(message: str) -> SystemExit:
    print(f"train.py: {message}", file=sys.stderr, flush=True)
    return SystemExit(1)


def read_config(path: Path) -> dict[str, Any]:
    """The settings of ``path`` over :data:`DEFAULTS`; an unknown key or choice fails."""
    given = tomllib.loads(path.read_text())
    config = {**DEFAULTS, **given, "lora": {**DEFAULTS["lora"], **given.get("lora", {})}}
    unknown = sorted({*given} - {*DEFAULTS}) + sorted(
        f"lora.{key}" for key in {*given.get("lora", {})} - {*DEFAULTS["lora"]})
    if unknown:
        raise fail(f"{path}: unknown settings {', '.join(unknown)}")
    for key, allowed in CHOICES.items():
        if config[key] not in allowed:
            raise fail(f"{path}: {key} = {config[key]!r}, expected one of {', '.join(allowed)}")
    if config["processes"] != "auto" and not (
            isinstance(config["processes"], int) and config["processes"] >= 1):
        raise fail(f"{path}: processes = {config['processes']!r}, expected \"auto\" or a "
                   "positive number")
    return config


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


def encode(tokenizer, row: dict, max_length: int) -> dict[str, list[int]]:
    """Token ids of prompt + completion + eos, and which of them are the completion's."""
    prompt_ids = tokenizer(row["prompt"]).input_ids
    completion_ids = tokenizer(row["completion"], add_special_tokens=False).input_ids
    ids = (prompt_ids + completion_ids + [tokenizer.eos_token_id])[:max_length]
    prompt_length = min(len(prompt_ids), len(ids))
    return {"input_ids": ids,
            "completion_mask": [0] * prompt_length + [1] * (len(ids) - prompt_length)}


def pick_device() -> str:
    """``$VTBENCH_DEVICE`` if set, else the GPU when there is one, else the CPU."""
    import torch

    return os.environ.get("VTBENCH_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


def keep_to_gpu_share(device: str) -> None:
    """On a GPU shared with the grader (one-GPU hosts), take at most the share of its
    memory the runner gives this side (``$VTBENCH_GPU_MEMORY_FRACTION``), so that the
    grader's evaluations keep theirs."""
    share = os.environ.get("VTBENCH_GPU_MEMORY_FRACTION")
    if share and device == "cuda":
        import torch

        for index in range(torch.cuda.device_count()):
            torch.cuda.set_per_process_memory_fraction(float(share), index)


def plan(config: dict) -> tuple[str, int]:
    """The device and the number of processes to train with: the launcher's processes when
    started by one, else the config's ("auto": one per visible GPU, 1 without a GPU)."""
    device = pick_device()
    if LAUNCHED in os.environ:
        return device, int(os.environ.get("WORLD_SIZE", "1"))
    gpus = 0
    if device == "cuda":
        import torch

        gpus = torch.cuda.device_count()
    processes = max(gpus, 1) if config["processes"] == "auto" else config["processes"]
    if device == "cuda" and processes > gpus:
        raise fail(f"processes = {processes} but only {gpus} GPU(s) are visible")
    if config["distributed"] == "fsdp" and processes > 1:
        if device == "cpu":
            raise fail("distributed = \"fsdp\" needs GPUs: use \"ddp\" on the CPU")
        if config["lora"]["enabled"]:
            raise fail("lora with distributed = \"fsdp\" is not supported: use \"ddp\" (the "
                       "frozen base is held in bf16, half the memory of full fine-tuning)")
    return device, processes


def launch(argv: list[str], processes: int, device: str, bf16: bool) -> int:
    """Run this script under ``accelerate launch`` with ``processes`` processes; its exit code.

    The multi-GPU launcher (torchrun) starts the processes in both cases; on the CPU,
    ``ACCELERATE_USE_CPU`` makes each of them join a gloo group instead of NCCL.
    """
    threads = os.environ.get("VTBENCH_THREADS", "1")
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
               "--num_processes", str(processes), "--num_machines", "1",
               "--main_process_port", "0", "--dynamo_backend", "no",
               "--mixed_precision", "bf16" if bf16 else "no",
               "--num_cpu_threads_per_process", threads, str(Path(__file__).resolve()), *argv]
    env = {**os.environ, "VTBENCH_THREADS": threads}
    if device == "cpu":
        env["ACCELERATE_USE_CPU"] = "true"
    return subprocess.run(command, env=env).returncode


def mixed_bf16(config: dict, device: str) -> bool:
    return device == "cuda" and config["precision"] == "bf16"


def load_model(base: Path, config: dict, device: str):
    """The base model: float32 master weights, except a LoRA base in bf16 on a GPU (frozen
    weights need no float32 copy)."""
    import torch
    from transformers import AutoModelForCausalLM

    frozen_bf16 = config["lora"]["enabled"] and mixed_bf16(config, device)
    return AutoModelForCausalLM.from_pretrained(
        base, dtype=torch.bfloat16 if frozen_bf16 else torch.float32, trust_remote_code=False,
        use_safetensors=True, local_files_only=True)


def schedule_name(config: dict) -> str:
    if config["schedule"] == "constant":
        return "constant_with_warmup" if config["warmup_steps"] else "constant"
    return config["schedule"]


def micro_batch(config: dict, processes: int) -> tuple[int, int]:
    """Rows per forward pass of one process, and forward passes per optimiser step."""
    rows_per_pass = config["micro_batch_size"] or max(1, config["batch_size"] // processes)
    accumulation, left = divmod(config["batch_size"], rows_per_pass * processes)
    if left or not accumulation:
        raise fail(f"batch_size = {config['batch_size']} is not a multiple of micro_batch_size "
                   f"({rows_per_pass}) × processes ({processes})")
    return rows_per_pass, accumulation


def checkpointing_args(config_class, enabled: bool) -> dict[str, Any]:
    """Gradient checkpointing under the name this transformers takes (``activation_`` from
    5.2x on, where the ``gradient_`` name only warns)."""
    fields = {field.name for field in dataclasses.fields(config_class)}
    prefix = "activation" if "activation_checkpointing" in fields else "gradient"
    return {f"{prefix}_checkpointing": enabled,
            f"{prefix}_checkpointing_kwargs": {"use_reentrant": False}}


def sft_config(config: dict, seed: int, device: str, processes: int, workdir: Path):
    from trl import SFTConfig

    rows_per_pass, accumulation = micro_batch(config, processes)
    fsdp = config["distributed"] == "fsdp" and processes > 1
    checkpointing = config["gradient_checkpointing"]
    return SFTConfig(
        output_dir=str(workdir), max_steps=config["steps"], seed=seed, data_seed=seed,
        per_device_train_batch_size=rows_per_pass, gradient_accumulation_steps=accumulation,
        learning_rate=config["lr"], lr_scheduler_type=schedule_name(config),
        warmup_steps=config["warmup_steps"], weight_decay=config["weight_decay"],
        max_grad_norm=config["max_grad_norm"], max_length=config["max_length"],
        completion_only_loss=config["completion_only_loss"], packing=config["packing"],
        packing_strategy=config["packing_strategy"],
        bf16=mixed_bf16(config, device), fp16=False, use_cpu=device == "cpu",
        **checkpointing_args(SFTConfig, checkpointing and not fsdp), fsdp=fsdp or None,
        torch_compile=config["compile"],
        fsdp_config={"version": 2, "activation_checkpointing": checkpointing} if fsdp else None,
        ddp_find_unused_parameters=False, dataloader_drop_last=True,
        logging_steps=config["log_every"], logging_nan_inf_filter=False, save_strategy="no",
        report_to="none", disable_tqdm=True, log_level="warning")


class Diverged(Exception):
    """The logged loss is not finite."""


def progress_callback(steps: int, curve: list[list]):
    """Prints and records the loss at each logging step; stops on a non-finite loss."""
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == steps:
                control.should_log = True

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "loss" not in logs:
                return
            loss = float(logs["loss"])
            if not math.isfinite(loss):
                raise Diverged(f"the loss is not finite at step {state.global_step}")
            curve.append([state.global_step, round(loss, 4), int(logs.get("num_tokens", 0))])
            if state.is_world_process_zero:
                print(f"step {state.global_step}/{steps} loss {loss:.3f}", flush=True)

    return Progress()


def build_trainer(base: Path, data: Path, seed: int, config: dict, workdir: Path,
                  curve: list[list] | None = None):
    """The SFTTrainer for ``base`` on the rows of ``data``, ready to ``train()``."""
    from datasets import Dataset, disable_progress_bars
    from peft import LoraConfig
    from transformers import AutoTokenizer, PrinterCallback
    from trl import SFTTrainer

    disable_progress_bars()
    device, processes = plan(config)
    args = sft_config(config, seed, device, processes, workdir)
    tokenizer = AutoTokenizer.from_pretrained(base, trust_remote_code=False,
                                              local_files_only=True)
    rows = [encode(tokenizer, row, config["max_length"]) for row in load_rows(data)]
    if len(rows) < config["batch_size"]:
        raise fail(f"only {len(rows)} usable rows in {data}")
    lora = config["lora"]
    peft_config = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                             target_modules=lora["target_modules"], task_type="CAUSAL_LM")
    trainer = SFTTrainer(
        model=load_model(base, config, device), args=args,
        train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
        peft_config=peft_config if lora["enabled"] else None,
        callbacks=[progress_callback(config["steps"], curve if curve is not None else [])])
    trainer.remove_callback(PrinterCallback)
    return trainer


def merged_lora(peft_model, base: Path, dtype):
    """The full model with the trained adapter merged in, in ``dtype``. A base trained in
    another dtype (bf16 on a GPU) is loaded again in ``dtype`` first, so that the weights
    the adapter leaves alone stay exactly the base's."""
    from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    if peft_model.get_base_model().dtype == dtype:
        return peft_model.merge_and_unload()
    adapter = get_peft_model_state_dict(peft_model)
    fresh = AutoModelForCausalLM.from_pretrained(base, dtype=dtype, trust_remote_code=False,
                                                 use_safetensors=True, local_files_only=True)
    fresh = get_peft_model(fresh, peft_model.peft_config["default"])
    set_peft_model_state_dict(fresh, adapter)
    return fresh.merge_and_unload()


def save_checkpoint(trainer, base: Path, out: Path) -> None:
    """Full weights (a LoRA adapter merged in) in the base's dtype, as safetensors, with
    config and tokenizer; every process must call it (FSDP gathers the weights)."""
    import torch
    from transformers import AutoConfig

    sharded = trainer.is_fsdp_enabled
    state = trainer.accelerator.get_state_dict(trainer.model) if sharded else None
    if not trainer.accelerator.is_main_process:
        return
    dtype = AutoConfig.from_pretrained(base, local_files_only=True).dtype or torch.float32
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):
        model = merged_lora(model, base, dtype)
    if state is None:
        model.to(dtype)
    else:
        state = {name: tensor.to(dtype) for name, tensor in state.items()}
    model.config.use_cache = True
    model.save_pretrained(out, state_dict=state, safe_serialization=True)
    trainer.processing_class.save_pretrained(out)


def train(base: Path, data: Path, out: Path, seed: int, config: dict,
          command: list[str] | None = None) -> dict | None:
    """Train, save, write train_log.json; the log on the main process, None on the others."""
    import torch

    torch.manual_seed(seed)
    curve: list[list] = []
    with tempfile.TemporaryDirectory(prefix="vtb-train-") as workdir:
        trainer = build_trainer(base, data, seed, config, Path(workdir), curve)
        started = time.time()
        try:
            trainer.train()
        except Diverged as err:
            raise fail(f"{err}: training diverged (try a lower lr); no model was saved") from None
        seconds = time.time() - started
        save_checkpoint(trainer, base, out)
    if not trainer.accelerator.is_main_process:
        return None
    tokens = curve[-1][2] if curve else 0
    state = trainer.accelerator.state
    log = {"rows": len(load_rows(data)), "config": config, "seed": seed,
           "device": state.device.type, "processes": state.num_processes,
           "distributed": config["distributed"] if state.num_processes > 1 else "none",
           "backend": state.backend,
           "precision": "bf16" if trainer.args.bf16 else "fp32",
           "loss_curve": [point[:2] for point in curve], "tokens": tokens,
           "seconds": round(seconds, 1), "tokens_per_second": round(tokens / seconds, 1),
           "command": command or []}
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
    config = read_config(args.config)
    device, processes = plan(config)
    if processes > 1 and LAUNCHED not in os.environ:
        raise SystemExit(launch(sys.argv[1:], processes, device, mixed_bf16(config, device)))
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(int(os.environ.get("VTBENCH_THREADS", "1")))
    keep_to_gpu_share(device)
    hf_logging.disable_progress_bar()
    # deprecations inside the libraries' own calls, which no setting here can avoid
    warnings.filterwarnings("ignore", category=FutureWarning,
                            module=r"(transformers|trl|peft|accelerate)\b")
    command = ["python", "trainer/train.py", *sys.argv[1:]]
    train(args.base, args.data, args.out, args.seed, config, command)


if __name__ == "__main__":
    main()
