"""The decomposition of a gain over the changed components: Shapley values that sum to
the gain, each change alone, and the interaction."""

import pytest

from vtbench.attribution import shapley
from vtbench.attribution.attribute import against_episode, decompose, interval, subsets
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.retrained import Attribution


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


def test_the_episodes_own_gain_is_the_attributed_gain_and_two_shifts() -> None:
    """An episode at seed 1 started from the initial system prepare trained at seed 0
    (test 0.246); rebuilt at the agent's seed it scores 0.174, so the attribution explains
    more than the episode gained, and says by how much and why."""
    record = EpisodeRecord(episode_id="e", task="extract", agent="reference", seed=1,
                           budget_minutes=3, started_at="2026-01-01T00:00:00+00:00",
                           initial_test=0.246, final_test=0.5776, gain=0.3316)
    result = against_episode(Attribution(
        status="attributed", changed=["data"], seeds=[0],
        systems={"": {"val": [0.2], "test": [0.174]},
                 "data": {"val": [0.6], "test": [0.5771]}}, gain=0.4031), record)
    assert result.episode_gain == 0.3316
    assert result.initial_shift == pytest.approx(-0.072)
    assert result.retrain_shift == pytest.approx(-0.0005)
    assert result.gain + result.initial_shift - result.retrain_shift == pytest.approx(0.3316)


def test_an_episode_without_attributed_numbers_gets_no_shifts() -> None:
    record = EpisodeRecord(episode_id="e", task="arith", agent="noop", seed=0, budget_minutes=3,
                           started_at="2026-01-01T00:00:00+00:00", gain=0.0)
    result = against_episode(Attribution(status="not reproducible", reasons=["x"]), record)
    assert result.episode_gain is None and result.initial_shift is None
