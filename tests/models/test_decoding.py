"""The static-cache decoding path against ``generate``, on the CPU with tiny models: the same
tokens (greedy and seeded), the same ends (EOS, max_tokens, stop strings), the same streams,
also when the host looks only every few steps and when a batch outgrows its cache."""

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
import torch

from vtbench.models.batching import BatchEngine, Completion, GenerationRequest
from vtbench.models.decoding import Decoder, row_draws, unsupported
from vtbench.models.static_cache import DecodeRow, grouped_decode_attention
from vtbench.models.tiny import new_tiny_model
from vtbench.models.tokenizer import build_char_tokenizer

Heard = list[list[tuple[int, int]]]


@pytest.fixture(scope="module")
def model() -> Any:
    torch.set_num_threads(1)
    return new_tiny_model(5).eval()


def ids(text: str) -> list[int]:
    return list(build_char_tokenizer()(text).input_ids)


def decoder_for(model: Any, **options: Any) -> Decoder:
    tokenizer = build_char_tokenizer()
    settings: dict[str, Any] = {"budget_bytes": 256 << 20, "sync_every": 1, "graphs": False}
    return Decoder(model, frozenset({tokenizer.eos_token_id}), tokenizer.pad_token_id,
                   **(settings | options))


def one_batch(engine: BatchEngine, requests: list[GenerationRequest],
              heard: list[Heard] | None = None) -> list[list[Completion]]:
    """Submit all at once (one batch, given the patient window); listen where ``heard``."""
    engine.start()
    try:
        calls = engine.stats.generate_calls
        futures: list[Future[list[Completion]]] = [
            engine.submit(r, heard[i].append if heard is not None else None)
            for i, r in enumerate(requests)]
        answers = [f.result(timeout=120) for f in futures]
    finally:
        engine.stop()
    assert engine.stats.generate_calls == calls + 1
    return answers


def both_paths(model: Any, requests: list[GenerationRequest], decoder: Decoder,
               listen: bool = False) -> Iterator[tuple[Any, Any]]:
    """Each request's answers (and what its listener heard) through ``generate`` and
    through ``decoder``, side by side."""
    runs = []
    for options in ({"static_cache": False}, {"decoder": decoder}):
        engine = BatchEngine(model, build_char_tokenizer(), max_batch=64, window_s=1.0,
                             gap_s=0.3, **options)
        heard: list[Heard] = [[] for _ in requests]
        runs.append((one_batch(engine, requests, heard if listen else None), heard, engine))
    assert runs[0][2].stats.static_batches == 0
    assert runs[1][2].stats.static_batches == 1
    yield from zip(zip(runs[0][0], runs[0][1], strict=True),
                   zip(runs[1][0], runs[1][1], strict=True), strict=True)


def same_completions(slow: list[Completion], fast: list[Completion]) -> bool:
    return [(c.token_ids, c.text, c.finish_reason) for c in slow] == [
        (c.token_ids, c.text, c.finish_reason) for c in fast]


def test_one_draw_per_row_gives_what_one_draw_per_step_gives() -> None:
    draws = row_draws([7, 9], [5, 3], 6)
    for row, (seed, count) in enumerate(((7, 5), (9, 3))):
        generator = torch.Generator().manual_seed(seed)
        one_by_one = [float(torch.rand((), generator=generator)) for _ in range(count)]
        assert draws[row, :count].tolist() == one_by_one
        assert draws[row, count:].tolist() == [0.0] * (6 - count)


def test_greedy_rows_get_the_tokens_of_generate(model: Any) -> None:
    requests = [GenerationRequest(ids("hello"), 30, ignore_eos=True),
                GenerationRequest(ids("a much longer prompt than the others"), 12),
                GenerationRequest(ids("q"), 40, n=2)]
    for (slow, _), (fast, _) in both_paths(model, requests, decoder_for(model)):
        assert same_completions(slow, fast)


def test_seeded_sampled_rows_get_the_tokens_of_generate(model: Any) -> None:
    requests = [GenerationRequest(ids("abc"), 25, n=3, temperature=0.9, top_p=0.8, seed=7,
                                  ignore_eos=True),
                GenerationRequest(ids("zz top"), 30, temperature=1.4, seed=1),
                GenerationRequest(ids("greedy among them"), 20, ignore_eos=True)]
    results = list(both_paths(model, requests, decoder_for(model)))
    for (slow, _), (fast, _) in results:
        assert same_completions(slow, fast)
    assert len({c.text for c in results[0][1][0]}) == 3


def test_rows_end_at_stop_strings_where_generate_ends_them_when_the_host_looks_every_few_steps(
        model: Any) -> None:
    engine = BatchEngine(model, build_char_tokenizer(), static_cache=False)
    full = one_batch(engine, [GenerationRequest(ids("abc"), 20, ignore_eos=True)])[0][0].text
    requests = [GenerationRequest(ids("abc"), 20, stop=(full[7:9], "never there"),
                                  ignore_eos=True),
                GenerationRequest(ids("abc"), 20, stop=(full[1:2],), ignore_eos=True),
                GenerationRequest(ids("other"), 20, n=2, temperature=1.0, seed=4,
                                  stop=("e", "5"))]
    results = list(both_paths(model, requests, decoder_for(model, sync_every=3)))
    for (slow, _), (fast, _) in results:
        assert same_completions(slow, fast)
    first = results[0][1][0][0]
    assert first.finish_reason == "stop" and first.text == full[:full.find(full[7:9])]


def test_listeners_hear_each_step_when_the_host_looks_every_few_steps(model: Any) -> None:
    requests = [GenerationRequest(ids("abc"), 14, stop=("x", "y", "z"), ignore_eos=True),
                GenerationRequest(ids("sampled"), 10, n=2, temperature=0.8, seed=3,
                                  ignore_eos=True),
                GenerationRequest(ids("quiet"), 16, ignore_eos=True)]
    for (slow, slow_heard), (fast, fast_heard) in both_paths(
            model, requests, decoder_for(model, sync_every=4), listen=True):
        assert same_completions(slow, fast)
        assert fast_heard == slow_heard
        for index, sample in enumerate(fast):
            assert [t for step in fast_heard for i, t in step if i == index] == sample.token_ids


def test_a_batch_that_outgrows_its_cache_goes_on_in_a_longer_one(model: Any) -> None:
    decoder = decoder_for(model, first_room=8)
    requests = [GenerationRequest(ids("grow"), 150, ignore_eos=True),
                GenerationRequest(ids("grow too"), 140, temperature=0.7, seed=2,
                                  ignore_eos=True)]
    for (slow, _), (fast, _) in both_paths(model, requests, decoder):
        assert same_completions(slow, fast)
    assert decoder.stats.growths == 2  # 64 → 128 → 256 positions


def test_a_batch_whose_cache_would_not_fit_goes_through_generate(model: Any) -> None:
    decoder = decoder_for(model, budget_bytes=1 << 16)
    request = GenerationRequest(ids("hello"), 20, ignore_eos=True)
    assert decoder.refusal([DecodeRow(request.prompt_ids, 20, 0.0, 1.0, 0, True)]) is not None
    engine = BatchEngine(model, build_char_tokenizer(), decoder=decoder)
    answer = one_batch(engine, [request])[0][0]
    assert engine.stats.static_batches == 0 and len(answer.token_ids) == 20


def test_a_request_for_logprobs_goes_through_generate(model: Any) -> None:
    engine = BatchEngine(model, build_char_tokenizer(), decoder=decoder_for(model))
    answer = one_batch(engine, [GenerationRequest(ids("hi"), 5, logprobs=2)])[0][0]
    assert engine.stats.static_batches == 0
    assert answer.logprobs is not None and len(answer.logprobs) == 5


def test_eager_attention_gets_the_tokens_of_generate_on_the_static_path() -> None:
    eager = new_tiny_model(6).eval()
    eager.set_attn_implementation("eager")
    requests = [GenerationRequest(ids("pad me"), 20, ignore_eos=True),
                GenerationRequest(ids("a longer prompt to pad the other"), 20,
                                  temperature=1.0, seed=5, ignore_eos=True)]
    for (slow, _), (fast, _) in both_paths(eager, requests, decoder_for(eager)):
        assert same_completions(slow, fast)


def grouped_query_model() -> Any:
    """A tiny Llama whose six query heads share two key/value heads."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_char_tokenizer()
    torch.manual_seed(3)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=96, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=256,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)).eval()


def test_grouped_decode_attention_is_transformers_sdpa_without_repeated_heads() -> None:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    layer = grouped_query_model().model.layers[0].self_attn
    generator = torch.Generator().manual_seed(0)
    query = torch.randn((3, 6, 1, 16), generator=generator)
    key, value = (torch.randn((3, 2, 20, 16), generator=generator) for _ in range(2))
    mask = torch.rand((3, 1, 1, 20), generator=generator) > 0.3
    ours, _ = grouped_decode_attention(layer, query, key, value, mask, scaling=0.25)
    theirs, _ = sdpa_attention_forward(layer, query, key, value, mask, scaling=0.25)
    assert ours.shape == theirs.shape == (3, 1, 6, 16)
    torch.testing.assert_close(ours, theirs)


def test_a_grouped_query_model_gets_the_tokens_of_generate() -> None:
    grouped = grouped_query_model()
    requests = [GenerationRequest(ids("share heads"), 30, ignore_eos=True),
                GenerationRequest(ids("a longer prompt for padding"), 30, n=2,
                                  temperature=0.8, seed=6, ignore_eos=True)]
    for (slow, _), (fast, _) in both_paths(grouped, requests, decoder_for(grouped)):
        assert same_completions(slow, fast)


def test_a_sliding_window_model_is_served_through_generate() -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_char_tokenizer()
    sliding = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, use_sliding_window=True,
        sliding_window=8, max_window_layers=0, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)).eval()
    assert unsupported(sliding) == "sliding-window or hybrid cache layers"
    engine = BatchEngine(sliding, tokenizer)
    answer = one_batch(engine, [GenerationRequest(ids("slide"), 12, ignore_eos=True)])[0][0]
    assert engine.stats.static_batches == 0 and len(answer.token_ids) == 12


def test_the_engine_takes_the_static_path_by_default(model: Any) -> None:
    engine = BatchEngine(model, build_char_tokenizer())
    one_batch(engine, [GenerationRequest(ids("default"), 6)])
    assert engine.stats.static_batches == 1



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_on_a_gpu_replayed_graphs_give_the_tokens_of_generate() -> None:
    cuda_model = new_tiny_model(5).eval().to("cuda")  # float32: no bf16 near-ties
    tokenizer = build_char_tokenizer()
    decoder = Decoder(cuda_model, frozenset({tokenizer.eos_token_id}), tokenizer.pad_token_id,
                      budget_bytes=1 << 30, sync_every=4, graphs=True, first_room=8)
    requests = [GenerationRequest(ids("grow on a gpu"), 90, ignore_eos=True),
                GenerationRequest(ids("abc"), 30, n=2, temperature=0.9, top_p=0.9, seed=3,
                                  stop=("q", "z"), ignore_eos=True),
                GenerationRequest(ids("greedy"), 40)]
    for (slow, slow_heard), (fast, fast_heard) in both_paths(cuda_model, requests, decoder,
                                                             listen=True):
        assert same_completions(slow, fast)
        assert fast_heard == slow_heard
    assert decoder.stats.graph_failures == 0
    assert decoder.stats.graph_captures == 4  # feed and sampled, before and after growing
    assert decoder.stats.growths == 1
