"""Sampled ÷ greedy generation time of the model server's batch engine, in one run.

A sampled row (temperature, top_p, its own seeded generator) goes through the engine's
logits processor at every step; a greedy row does not. Both runs generate the same number
of tokens for the same prompts (EOS ignored), so the ratio is what sampling costs. The model
has SmolLM2-135M's shape (49,152-token vocabulary, where sampling costs most) with random
weights, and a word-level tokenizer of the same size: nothing is downloaded. ``--path``
picks the engine's static-cache path (its default) or ``generate``.

Usage: python bench/sampling_cost.py [--rows 64] [--tokens 128] [--rounds 3] [--device D]
       [--path static|generate]
"""

import argparse
import statistics
import time

import torch

from vtbench.models.batching import BatchEngine, GenerationRequest

VOCAB = 49152


def smol_shaped_model(device: str) -> "torch.nn.Module":
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         max_position_embeddings=2048, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    return LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def word_tokenizer() -> object:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    vocab.update({f"w{i}": i for i in range(4, VOCAB)})
    backend = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>",
                                   bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def timed_batch(engine: BatchEngine, requests: list[GenerationRequest]) -> float:
    started = time.perf_counter()
    futures = [engine.submit(request) for request in requests]
    for future in futures:
        assert len(future.result()[0].text.split()) > 0
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--path", choices=("static", "generate"), default="static")
    args = parser.parse_args()
    torch.set_num_threads(1)
    engine = BatchEngine(smol_shaped_model(args.device), word_tokenizer(),
                         max_batch=args.rows, static_cache=args.path == "static")
    engine.start()
    generator = torch.Generator().manual_seed(0)
    prompts = [torch.randint(4, VOCAB, (100,), generator=generator).tolist()
               for _ in range(args.rows)]

    def requests(temperature: float) -> list[GenerationRequest]:
        return [GenerationRequest(prompt_ids=p, max_tokens=args.tokens, ignore_eos=True,
                                  temperature=temperature, top_p=0.95, seed=i)
                for i, p in enumerate(prompts)]

    timed_batch(engine, requests(0.0))  # warm-up (captures the greedy and sampled graphs)
    timed_batch(engine, requests(0.7))
    greedy, sampled = [], []
    for _ in range(args.rounds):
        greedy.append(timed_batch(engine, requests(0.0)))
        sampled.append(timed_batch(engine, requests(0.7)))
    engine.stop()
    g, s = statistics.median(greedy), statistics.median(sampled)
    print(f"device {args.device}, {args.path} path: {args.rows} rows x {args.tokens} tokens, "
          f"greedy {g:.2f} s, sampled {s:.2f} s (medians of {args.rounds})")
    print(f"sampled / greedy time: {s / g:.2f}")


if __name__ == "__main__":
    main()
