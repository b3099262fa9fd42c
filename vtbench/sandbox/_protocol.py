"""The :class:`Sandbox` boundary every backend implements."""

from typing import Protocol

from vtbench.sandbox._process import SandboxProcess, Stream
from vtbench.sandbox._spec import CompletedRun, SandboxSpec


class Sandbox(Protocol):
    """Runs untrusted commands with only what a :class:`SandboxSpec` grants."""

    name: str

    def start(
        self, argv: list[str], spec: SandboxSpec,
        stdin: Stream = None, stdout: Stream = None, stderr: Stream = None,
    ) -> SandboxProcess:
        """Start ``argv`` inside a new sandbox and return at once. The wall-clock limit
        is enforced from now on, whether or not the caller waits."""
        ...

    def run(
        self, argv: list[str], spec: SandboxSpec, input: bytes | None = None,
        max_output_bytes: int = 16 * 1024 * 1024,
    ) -> CompletedRun:
        """Start, feed ``input``, wait for the end or the wall-clock limit, and return
        the outputs (each cut at ``max_output_bytes``)."""
        ...
