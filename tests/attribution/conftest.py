"""The episode tests' quickly prepared arith and its grader, shared by a test module."""

from tests.episode.conftest import episode_home, grader, prepared_arith, private_store

__all__ = ["episode_home", "grader", "prepared_arith", "private_store"]
