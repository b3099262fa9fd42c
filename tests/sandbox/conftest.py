"""Fixtures for sandbox tests: the real bwrap backend."""

import pytest

from vtbench.sandbox import Sandbox, get_sandbox


@pytest.fixture
def sandbox() -> Sandbox:
    return get_sandbox("bwrap")
