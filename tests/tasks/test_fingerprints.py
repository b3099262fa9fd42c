"""The shape of a fingerprint: a span of an item, never a name or a short string."""

import pytest

from vtbench.tasks.fingerprints import MIN_LENGTH, MIN_WORDS, is_specific


@pytest.mark.parametrize("text", [
    "remove_duplicates", "greatest_common_divisor", "HumanEval/12", "simple_python_12",
    "cd(folder='tmp')", "torch.nn.functional.scaled_dot_product_attention",
    "/usr/share/cmake-4.4/Help/command/list.rst", "multiply 6 by 4", "  padded name  ",
    "in: ab out: ba"])
def test_names_ids_paths_calls_and_short_strings_are_no_fingerprints(text: str) -> None:
    assert not is_specific(text)


@pytest.mark.parametrize("text", [
    "multiply 60 by 46.", "our new tailor is lars varga.",
    "assert candidate([1, 2, 3, 2, 4, 3, 5]) == [1, 4, 5]",
    ">>> separate_paren_groups('( ) (( )) (( )( ))')",
    "Input to this function is a string containing multiple groups of nested parentheses."])
def test_whole_lines_and_sentences_of_an_item_are_fingerprints(text: str) -> None:
    assert is_specific(text)


def test_the_rule_counts_words_and_characters_without_the_surrounding_whitespace() -> None:
    words = " ".join(["w"] * MIN_WORDS)
    assert not is_specific(f"   {words}   ")
    assert is_specific(words + "x" * (MIN_LENGTH - len(words)))
    assert not is_specific("x" * 40 + "  " + "y" * 40)
