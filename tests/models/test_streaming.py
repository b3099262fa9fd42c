"""The text a stream sends: never taken back, equal in the end to the whole decode."""

from vtbench.models.streaming import IncrementalText
from vtbench.models.tokenizer import build_char_tokenizer


def test_a_stop_string_and_its_beginnings_are_held_back() -> None:
    tokenizer = build_char_tokenizer()
    ids = tokenizer("say STOP now", add_special_tokens=False).input_ids
    text = IncrementalText(lambda t: str(tokenizer.decode(t, skip_special_tokens=True)),
                           ("STOP",))
    deltas = [text.add(token) for token in ids]
    assert "".join(deltas) == "say "
    assert deltas[ids.index(tokenizer.convert_tokens_to_ids("S")):] == [""] * 8
    assert text.finish("say ") == ""


def test_bytes_of_an_unfinished_character_wait_for_the_rest() -> None:
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(["plain ascii words"], vocab_size=257, min_frequency=1,
                                  show_progress=False)
    sample = "déjà vu: 日本語 ok"
    ids = tokenizer.encode(sample).ids
    assert len(ids) > len(sample)  # multi-byte characters span several tokens
    text = IncrementalText(tokenizer.decode, ())
    deltas = [text.add(token) for token in ids]
    assert not any("\ufffd" in delta for delta in deltas)
    assert "".join(deltas) == tokenizer.decode(ids) == sample
    assert text.finish(sample) == ""
