"""The batch engine in-process: mixed sampling settings share a batch without changing results."""

from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from vtbench.models.batching import BatchEngine, Completion, GenerationRequest, TextCodec
from vtbench.models.tiny import new_tiny_model
from vtbench.models.tokenizer import build_char_tokenizer


@pytest.fixture(scope="module")
def engine() -> Iterator[BatchEngine]:
    import torch

    torch.set_num_threads(1)
    running = BatchEngine(new_tiny_model(5).eval(), build_char_tokenizer(), max_batch=16,
                          window_s=1.0, gap_s=0.2)
    running.start()
    yield running
    running.stop()


def ids(text: str) -> list[int]:
    return list(build_char_tokenizer()(text).input_ids)


def together(engine: BatchEngine, *requests: GenerationRequest) -> list[list[Completion]]:
    """Submit all at once (one batch, given the patient window) and wait for each."""
    futures: list[Future[list[Completion]]] = [engine.submit(r) for r in requests]
    return [f.result(timeout=120) for f in futures]


def test_the_rust_backend_codec_agrees_with_the_tokenizer() -> None:
    tokenizer = build_char_tokenizer()
    codec = TextCodec(tokenizer)
    assert codec.backend is not None
    text = "x = [1, 2]\n\tprint('hi')"
    assert codec.encode(text) == list(tokenizer(text).input_ids)
    assert codec.decode(codec.encode(text)) == text


def test_a_seeded_sample_does_not_depend_on_its_batch(engine: BatchEngine) -> None:
    seeded = GenerationRequest(ids("abc"), 12, n=2, temperature=0.9, top_p=0.8, seed=123,
                               ignore_eos=True)
    alone = together(engine, seeded)[0]
    others = [GenerationRequest(ids(p), 12, temperature=t, ignore_eos=True)
              for p, t in (("long prompt here", 0.0), ("zz", 1.3))]
    calls = engine.stats.generate_calls
    crowded = together(engine, others[0], seeded, others[1])[1]
    assert engine.stats.generate_calls == calls + 1
    assert [c.text for c in crowded] == [c.text for c in alone]
    assert alone[0].text != alone[1].text


def test_greedy_rows_are_untouched_by_sampled_rows_in_their_batch(engine: BatchEngine) -> None:
    greedy = GenerationRequest(ids("hello"), 10, ignore_eos=True)
    alone = together(engine, greedy)[0][0]
    mixed = together(engine, GenerationRequest(ids("hello"), 10, temperature=1.0), greedy)[1][0]
    assert mixed.token_ids == alone.token_ids


def test_top_p_near_zero_is_greedy(engine: BatchEngine) -> None:
    greedy = GenerationRequest(ids("q"), 10, ignore_eos=True)
    nucleus = GenerationRequest(ids("q"), 10, temperature=1.0, top_p=1e-6, seed=1,
                                ignore_eos=True)
    first, second = together(engine, greedy, nucleus)
    assert first[0].token_ids == second[0].token_ids


def test_a_request_with_more_samples_than_a_batch_is_split_and_completed(
        engine: BatchEngine) -> None:
    wide = GenerationRequest(ids("a"), 3, n=40, temperature=1.0, seed=9, ignore_eos=True)
    calls = engine.stats.generate_calls
    (samples,) = together(engine, wide)
    assert len(samples) == 40
    assert engine.stats.generate_calls - calls == 3  # 16 + 16 + 8 rows
    assert all(len(c.token_ids) == 3 for c in samples)


def test_eos_ends_a_row_unless_it_is_ignored() -> None:
    import torch

    tokenizer = build_char_tokenizer()
    model = new_tiny_model(5).eval()
    prompt = ids("stop here")
    with torch.no_grad():  # EOS's (tied) embedding becomes twice a likely token's: EOS wins
        favourite = int(model(torch.tensor([prompt])).logits[0, -1].argmax())
        weights = model.model.embed_tokens.weight
        weights[tokenizer.eos_token_id] = 2 * weights[favourite]
    engine = BatchEngine(model, tokenizer, max_batch=4, window_s=1.0, gap_s=0.2)
    engine.start()
    try:
        ended, ignored = together(engine, GenerationRequest(prompt, 20),
                                  GenerationRequest(prompt, 20, ignore_eos=True))
    finally:
        engine.stop()
    tokens = ignored[0].token_ids
    assert len(tokens) == 20
    assert ignored[0].finish_reason == "length"
    assert tokenizer.eos_token_id in tokens
    cut = tokens.index(tokenizer.eos_token_id) + 1
    assert ended[0].token_ids == tokens[:cut]
    assert ended[0].finish_reason == "stop"
    assert ended[0].text == tokenizer.decode(tokens[:cut], skip_special_tokens=True)


def _run_engine(**options: float) -> BatchEngine:
    import torch

    torch.set_num_threads(1)
    engine = BatchEngine(new_tiny_model(5).eval(), build_char_tokenizer(), max_batch=4,
                         **options)  # type: ignore[arg-type]
    engine.start()
    return engine


def test_the_last_rows_of_a_workload_sent_at_once_do_not_sit_out_the_window() -> None:
    engine = _run_engine(window_s=2.0, gap_s=0.05)
    try:  # ten rows at once: batches of 4, 4, 2; nobody comes back for the last 2 rows
        together(engine, *[GenerationRequest(ids(f"row {i}"), 3) for i in range(10)])
    finally:
        engine.stop()
    assert engine.stats.generate_calls == 3
    assert engine.stats.collect_seconds < 1.0  # waiting out the window would take 2 s


def test_clients_that_come_back_once_answered_still_share_full_batches() -> None:
    import threading

    engine = _run_engine(window_s=2.0, gap_s=0.2)
    start = threading.Barrier(4)

    def client(k: int) -> None:
        start.wait()
        for turn in range(3):
            engine.submit(GenerationRequest(ids(f"client {k} turn {turn}"), 3)).result(120)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        engine.stop()
    assert engine.stats.generate_calls == 3
    assert engine.stats.largest_batch == 4


def test_a_listener_gets_each_rows_tokens_step_by_step_up_to_where_it_ended(
        engine: BatchEngine) -> None:
    heard: dict[str, list[list[tuple[int, int]]]] = {"cut": [], "sampled": []}
    full = together(engine, GenerationRequest(ids("abc"), 12, ignore_eos=True))[0][0].text
    cut = GenerationRequest(ids("abc"), 12, stop=(full[4:6],), ignore_eos=True)
    sampled = GenerationRequest(ids("abc"), 12, n=2, temperature=0.8, seed=3, ignore_eos=True)
    futures = [engine.submit(cut, heard["cut"].append),
               engine.submit(sampled, heard["sampled"].append),
               engine.submit(GenerationRequest(ids("other"), 12, ignore_eos=True))]
    answers = {name: f.result(timeout=120) for name, f in zip(heard, futures, strict=False)}
    futures[2].result(timeout=120)
    assert answers["cut"][0].finish_reason == "stop"
    assert len(answers["cut"][0].token_ids) < 12
    for name, samples in answers.items():
        steps = heard[name]
        assert all(len({i for i, _ in step}) == len(step) for step in steps)  # one per row
        for index, sample in enumerate(samples):
            assert [t for step in steps for i, t in step if i == index] == sample.token_ids


def test_a_listener_that_raises_does_not_fail_its_batch(engine: BatchEngine) -> None:
    def broken(_: list[tuple[int, int]]) -> None:
        raise RuntimeError("the client went away")

    request = GenerationRequest(ids("abc"), 8, ignore_eos=True)
    futures = [engine.submit(request, broken), engine.submit(request)]
    first, second = (f.result(timeout=120) for f in futures)
    assert first[0].token_ids == second[0].token_ids and len(first[0].token_ids) == 8


def test_these_batches_go_through_the_static_cache(engine: BatchEngine) -> None:
    before = engine.stats.static_batches
    together(engine, GenerationRequest(ids("abc"), 4, temperature=0.5, seed=1))
    assert engine.stats.static_batches == before + 1
