"""Fixtures for sandbox tests: every backend that isolates, run for real.

``sandbox`` is parametrized over bwrap and docker. The docker half runs whenever a
Docker daemon answers on this host and is skipped, saying so, only when none does (CI
has none); see :func:`tests.sandbox.helpers.docker_or_skip`.
"""

import pytest

from tests.sandbox.helpers import docker_or_skip
from vtbench.sandbox import Sandbox, get_sandbox


@pytest.fixture(scope="session")
def docker_sandbox() -> Sandbox:
    return docker_or_skip()


@pytest.fixture(params=["bwrap", "docker"])
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    if request.param == "docker":
        backend: Sandbox = request.getfixturevalue("docker_sandbox")
        return backend
    return get_sandbox("bwrap")
