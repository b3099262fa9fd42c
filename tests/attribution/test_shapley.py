"""The decomposition of a gain over the changed components: Shapley values that sum to
the gain, each change alone, and the interaction."""

import pytest

from vtbench.attribution import shapley
from vtbench.attribution.attribute import decompose, interval, subsets


def test_three_changed_components_give_eight_subsets_and_an_empty_one_gives_one() -> None:
    assert len(subsets(["data", "trainer", "harness"])) == 8
    assert subsets([]) == [frozenset()]


def test_shapley_values_sum_to_the_gain_and_split_an_interaction_evenly() -> None:
    scores = {"": 0.1, "data": 0.4, "trainer": 0.1, "data+trainer": 0.7}

    def value(subset: frozenset[str]) -> float:
        return scores["+".join(c for c in ("data", "trainer") if c in subset)]

    parts = decompose(["data", "trainer"], value)
    assert parts["gain"] == pytest.approx(0.6)
    assert parts["shapley.data"] + parts["shapley.trainer"] == pytest.approx(0.6)
    assert parts["alone.data"] == pytest.approx(0.3) and parts["alone.trainer"] == 0.0
    assert parts["interaction"] == pytest.approx(0.3)
    assert parts["shapley.data"] == pytest.approx(0.45)  # 0.3 alone + half the interaction
    assert parts["shapley.trainer"] == pytest.approx(0.15)


def test_a_component_whose_change_never_moves_the_score_gets_nothing() -> None:
    def value(subset: frozenset[str]) -> float:
        return 0.2 + (0.5 if "data" in subset else 0.0) + (0.1 if "harness" in subset else 0)

    shares = shapley(["data", "trainer", "harness"], value)
    assert shares["trainer"] == 0.0
    assert shares["data"] == pytest.approx(0.5) and shares["harness"] == pytest.approx(0.1)


def test_the_seed_interval_is_students_t_around_the_mean() -> None:
    low, high = interval([0.1, 0.3])
    assert (low + high) / 2 == pytest.approx(0.2)
    assert high - low == pytest.approx(2 * 12.706 * 0.1, rel=1e-4)  # sd/sqrt(2) = 0.1
