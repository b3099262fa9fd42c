"""The adapter protocol and the context the runner hands to an adapter."""

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class AgentContext:
    task: str
    seed: int
    budget_minutes: float
    prompt: str
    """The instruction for LLM agents: read TASK.md, improve, validate, submit."""
    model: str | None = None
    """The LLM the agent should use (LLM agents only)."""
    reasoning_effort: str | None = None
    gateway_url: str | None = None
    """Base URL of the LLM gateway inside the sandbox; None when no gateway runs."""
    extra_env: dict[str, str] = field(default_factory=dict)


class AgentAdapter(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def needs_gateway(self) -> bool:
        """Whether the runner must start an LLM gateway for this agent."""
        ...

    @property
    def needs_playbook(self) -> bool:
        """Whether the agent reads the task author's reference playbook (built-in agents)."""
        ...

    def command(self, context: AgentContext) -> list[str]:
        """The command to run inside the sandbox, in /workspace."""
        ...

    def environment(self, context: AgentContext) -> dict[str, str]:
        """Extra environment variables for the agent (never a real API key)."""
        ...
