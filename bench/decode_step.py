"""Milliseconds per decoding step of the batch engine at 256 rows: its ``generate`` path ÷ its
static path (static KV cache, the step captured as CUDA graphs), and the graphs' capture
seconds, all in one run.

The same sampled requests (temperature 0.8, top_p 0.95, one seed each, 100-token prompts,
EOS ignored, as ``batch_rows.py`` sends them) go through an engine with ``static_cache``
off and one with it on, one batch of all rows at a time. The model has SmolLM2-135M's shape
with random weights (see ``sampling_cost.py``): nothing is downloaded. Each engine first
runs one untimed batch of each size below (on the static path that batch captures the
graphs of its shape: the capture seconds printed; later batches of that shape reuse them).
Per path: a batch's generation seconds ÷ its tokens per row (what ``batch_rows.py``
reports) and the marginal cost of a step, (T − T/8 tokens' seconds) ÷ (7T/8), which leaves
the prefill out. Also how many rows' tokens the two paths agree on: every greedy row; a
sampled row of this random-weight model may not (its next-token distributions are nearly
uniform, so a rounding difference between the paths flips a near tie, on a CPU as well as
in bf16 on a GPU, and the row goes its own way). Last, the nucleus sampler alone
(``sample_rows`` on the rows' logits over the whole vocabulary), to show how much of a step
it takes.

    python bench/decode_step.py --device cuda
"""

import argparse
import statistics
import time
from concurrent.futures import Future
from dataclasses import dataclass

import torch
from sampling_cost import VOCAB, smol_shaped_model, word_tokenizer

from vtbench.models.batching import BatchEngine, Completion, GenerationRequest
from vtbench.models.static_cache import sample_rows


def requests(rows: int, tokens: int, temperature: float) -> list[GenerationRequest]:
    generator = torch.Generator().manual_seed(0)
    return [GenerationRequest(prompt_ids=torch.randint(4, VOCAB, (100,),
                                                       generator=generator).tolist(),
                              max_tokens=tokens, ignore_eos=True, temperature=temperature,
                              top_p=0.95, seed=i) for i in range(rows)]


def batch(engine: BatchEngine, batch_requests: list[GenerationRequest]) -> tuple[
        float, list[list[int]]]:
    """One batch of all the requests: its generation seconds and each row's tokens."""
    before, calls = engine.stats.generate_seconds, engine.stats.generate_calls
    futures: list[Future[list[Completion]]] = [engine.submit(r) for r in batch_requests]
    answers = [f.result(timeout=1800)[0].token_ids for f in futures]
    assert engine.stats.generate_calls == calls + 1, "the rows did not share one batch"
    return engine.stats.generate_seconds - before, answers


@dataclass(frozen=True)
class PathResult:
    seconds: float  # a batch of all rows, T tokens each (median)
    per_step_ms: float  # seconds / T
    marginal_ms: float  # (T tokens' seconds - T/8 tokens' seconds) / (7T/8)
    warmup_s: float  # the untimed first batches (graph capture included)
    capture_s: float
    captures: int
    capture_failures: int  # kinds of graph that would not capture (their steps ran eagerly)
    tokens: list[list[int]]  # each row's tokens in the last timed batch


def measure(model: torch.nn.Module, static: bool, args: argparse.Namespace) -> PathResult:
    long = requests(args.rows, args.tokens, args.temperature)
    short = requests(args.rows, max(1, args.tokens // 8), args.temperature)
    engine = BatchEngine(model, word_tokenizer(), max_batch=args.rows, window_s=5.0,
                         gap_s=1.0, static_cache=static)
    engine.start()
    try:
        started = time.perf_counter()
        batch(engine, long)
        batch(engine, short)
        warmup = time.perf_counter() - started
        captured = engine.stats.capture_seconds
        timings: dict[str, list[float]] = {"long": [], "short": []}
        for _ in range(args.rounds):
            seconds, tokens = batch(engine, long)
            timings["long"].append(seconds)
            timings["short"].append(batch(engine, short)[0])
        assert engine.stats.capture_seconds == captured, "a timed batch captured graphs"
    finally:
        engine.stop()
    assert static == (engine.stats.static_batches > 0), "the engine took the other path"
    long_s, short_s = (statistics.median(timings[k]) for k in ("long", "short"))
    steps = args.tokens - max(1, args.tokens // 8)
    return PathResult(long_s, 1000 * long_s / args.tokens,
                      1000 * (long_s - short_s) / steps if steps else float("nan"), warmup,
                      captured, engine.stats.graph_captures, engine.stats.graph_failures,
                      tokens)


def sampler_ms(rows: int, device: str, temperature: float, repeats: int = 50) -> float:
    """Median milliseconds of one :func:`sample_rows` call on ``rows`` random logits."""
    generator = torch.Generator(device=device).manual_seed(0)
    logits = torch.randn(rows, VOCAB, device=device, generator=generator) * 4
    heat = torch.full((rows,), max(temperature, 1e-3), device=device)
    top_p = torch.full((rows,), 0.95, device=device)
    draws = torch.rand(rows, device=device, generator=generator)
    timings = []
    for _ in range(repeats + 3):
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        sample_rows(logits, heat, top_p, draws)
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        timings.append(1000 * (time.perf_counter() - started))
    return statistics.median(timings[3:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=None, help="256 on CUDA, 8 on a CPU")
    parser.add_argument("--tokens", type=int, default=None, help="128 on CUDA, 16 on a CPU")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=0.8, help="0: greedy rows")
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    args.rows = args.rows or (256 if cuda else 8)
    args.tokens = args.tokens or (128 if cuda else 16)
    torch.set_num_threads(1)
    model = smol_shaped_model(args.device)
    name = torch.cuda.get_device_name(args.device) if cuda else "CPU, one thread"
    print(f"{name}; torch {torch.__version__}; {args.rows} rows x {args.tokens} tokens, "
          f"temperature {args.temperature}; medians of {args.rounds}")
    results = {path: measure(model, path == "static", args) for path in ("generate", "static")}
    for path, r in results.items():
        print(f"{path:>8}: {r.seconds:.3f} s a batch, {r.per_step_ms:.2f} ms a step "
              f"(marginal {r.marginal_ms:.2f} ms); first batches {r.warmup_s:.2f} s, "
              f"{r.captures} graphs captured in {r.capture_s:.2f} s"
              + (f", {r.capture_failures} kinds failed to capture" if r.capture_failures else ""))
    slow, fast = results["generate"], results["static"]
    agree = sum(a == b for a, b in zip(slow.tokens, fast.tokens, strict=True))
    print(f"generate / static per step: {slow.per_step_ms / fast.per_step_ms:.2f} "
          f"(marginal {slow.marginal_ms / fast.marginal_ms:.2f}); "
          f"rows with identical tokens: {agree}/{args.rows}")
    alone = sampler_ms(args.rows, args.device, args.temperature)
    print(f"the sampler alone: {alone:.2f} ms a step ({alone / fast.marginal_ms:.0%} of the "
          f"static path's marginal step)")


if __name__ == "__main__":
    main()
