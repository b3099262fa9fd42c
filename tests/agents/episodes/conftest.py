"""Baseline agents in real episodes share the episode tests' quickly prepared arith and its
grader, one per test module."""

from tests.episode.conftest import (  # noqa: F401  (fixtures, found by name)
    episode_home,
    grader,
    prepared_arith,
    private_store,
)
