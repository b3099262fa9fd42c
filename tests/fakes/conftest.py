"""Make the shared fakes' fixtures available to their own tests."""

from tests.fakes.scripted_upstream import scripted_upstream

__all__ = ["scripted_upstream"]
