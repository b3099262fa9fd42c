"""Throughput of the model server's batch engine at 256 rows per batch ÷ at 64, in one run.

The same 256 sampled requests (temperature 0.8, top_p 0.95, EOS ignored, as a harness that
draws many samples sends them) go through an engine with ``max_batch`` 64 (four batches)
and one with 256 (one batch). The model has SmolLM2-135M's shape with random weights (see
``sampling_cost.py``): nothing is downloaded. The server's default is 256 on a GPU and 64
on a CPU; this is what that choice gains or would lose. ``--path generate`` sends every
batch through ``generate`` instead of the engine's static-cache path (its default where the
model allows), to compare with the measurements made before that path existed.

Usage: python bench/batch_rows.py [--tokens 128] [--rounds 3] [--device D] [--path P]
"""

import argparse
import statistics

import torch
from sampling_cost import VOCAB, smol_shaped_model, timed_batch, word_tokenizer

from vtbench.models.batching import BatchEngine, GenerationRequest

ROWS = 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--path", choices=("static", "generate"), default="static")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tokenizer = smol_shaped_model(args.device), word_tokenizer()
    generator = torch.Generator().manual_seed(0)
    requests = [GenerationRequest(prompt_ids=torch.randint(4, VOCAB, (100,),
                                                           generator=generator).tolist(),
                                  max_tokens=args.tokens, ignore_eos=True, temperature=0.8,
                                  top_p=0.95, seed=i) for i in range(ROWS)]
    seconds = {}
    for max_batch in (64, ROWS):
        engine = BatchEngine(model, tokenizer, max_batch=max_batch,
                             static_cache=args.path == "static")
        engine.start()
        timed_batch(engine, requests[:max_batch])  # warm-up (captures the step's graphs)
        seconds[max_batch] = statistics.median(timed_batch(engine, requests)
                                               for _ in range(args.rounds))
        engine.stop()
    print(f"device {args.device}, {args.path} path: {ROWS} sampled rows x {args.tokens} tokens, "
          f"max_batch 64: {seconds[64]:.2f} s, max_batch {ROWS}: {seconds[ROWS]:.2f} s "
          f"(medians of {args.rounds}; {1000 * seconds[ROWS] / args.tokens:.1f} ms a step "
          f"at {ROWS} rows)")
    print(f"throughput at {ROWS} rows / at 64: {seconds[64] / seconds[ROWS]:.2f}")


if __name__ == "__main__":
    main()
