"""Evaluation throughput ÷ direct batched ``generate`` of the same completions, one run.

The evaluation pipeline (model server + harness in its sandbox + scorer) scores N arith
items with a model; the baseline generates the same greedy completions in this process
with ``model.generate`` on batches of ``--batch`` rows, on the device the server picks
(``--device``: CUDA where there is one). Both use one torch thread. Prints instances/s of
each, the ratio end to end (server start included), for the harness phase alone and for
the server's generation seconds alone, how many completions agree, and, where
``nvidia-smi`` exists, the GPU's utilisation sampled every 0.2 s during each phase.

    python bench/eval_throughput.py --model models/tiny-base --items 2000
"""

import argparse
import random
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType

import torch

from vtbench.evaluation import evaluate
from vtbench.models.checkpoint import load_checkpoint, load_tokenizer
from vtbench.tasks import find_task


class GpuUtilisation:
    """Samples ``nvidia-smi``'s utilisation of one GPU every ``period`` seconds in a thread
    while in use (``with``); samples nothing on a host without ``nvidia-smi``."""

    def __init__(self, gpu: int, period: float = 0.2) -> None:
        self.command = shutil.which("nvidia-smi")
        self.gpu, self.period = gpu, period
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        assert self.command is not None
        while not self._stop.wait(self.period):
            done = subprocess.run(
                [self.command, f"--id={self.gpu}", "--query-gpu=utilization.gpu",
                 "--format=csv,noheader,nounits"], capture_output=True, text=True, check=False)
            if done.returncode == 0 and done.stdout.strip().isdigit():
                self.samples.append(int(done.stdout.strip()))

    def __enter__(self) -> "GpuUtilisation":
        if self.command is not None:
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def summary(self) -> str:
        if self.command is None:
            return "GPU utilisation: no nvidia-smi here"
        if not self.samples:
            return "GPU utilisation: no samples"
        return (f"GPU utilisation: mean {statistics.mean(self.samples):.0f}%, "
                f"max {max(self.samples)}% ({len(self.samples)} samples)")


def direct(model_dir: Path, prompts: list[str], max_tokens: int, batch: int,
           device: str) -> list[str]:
    model, tokenizer = load_checkpoint(model_dir, device), load_tokenizer(model_dir)
    texts = []
    for start in range(0, len(prompts), batch):
        encoded = tokenizer(prompts[start:start + batch], return_tensors="pt",
                            padding=True).to(device)
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
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="of the direct baseline; the server picks CUDA where there is one")
    parser.add_argument("--sandbox", default="bwrap", help="the harness's sandbox backend")
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = find_task("arith")
    rows = task.builder.build_split(random.Random(0), args.items, set())
    items = [{"id": f"bench-{i:05d}", **row} for i, row in enumerate(rows)]
    settings = task.spec.components.harness.decoding
    prompts = [task.builder.PROMPT.format(**item["input"]) for item in items]
    gpu = torch.device(args.device).index or 0
    if args.device.startswith("cuda"):
        torch.zeros(1, device=args.device)  # the process's CUDA start is no one's generation
    started = time.perf_counter()
    with GpuUtilisation(gpu) as direct_use:
        baseline = direct(args.model, prompts, settings.max_tokens, args.batch, args.device)
    direct_seconds = time.perf_counter() - started
    started = time.perf_counter()
    with GpuUtilisation(gpu) as eval_use:
        result = evaluate(task, args.model, "val", items=items, sandbox=args.sandbox)
    eval_seconds = time.perf_counter() - started
    agree = sum(a == (i.output or "") for a, i in zip(baseline, result.instances, strict=True))
    n, timings = len(items), result.timings
    failed = [i.error for i in result.instances if i.error]
    if result.error or failed or not timings["generation"]:
        raise SystemExit(f"the evaluation did not generate: {result.error or ''} "
                         f"{len(failed)} instance errors, e.g. {failed[:1]}")
    print(f"direct generate ({args.device}, batch {args.batch}): {n / direct_seconds:.1f} "
          f"instances/s ({direct_seconds:.1f} s); {direct_use.summary()}")
    print(f"vtbench eval:    {n / eval_seconds:.1f} instances/s ({eval_seconds:.1f} s; "
          f"server start {timings['server_start']:.1f} s, harness {timings['harness']:.1f} s, "
          f"generation {timings['generation']:.1f} s); {eval_use.summary()}")
    print(f"ratio end to end: {direct_seconds / eval_seconds:.3f}; "
          f"harness phase only: {direct_seconds / timings['harness']:.3f}; "
          f"generation only: {direct_seconds / timings['generation']:.3f} (goal >= 0.9)")
    print(f"identical completions: {agree}/{n}")


if __name__ == "__main__":
    main()
