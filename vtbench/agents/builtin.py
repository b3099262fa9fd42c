"""Agents that need no LLM: ``noop``, ``reference`` and ``command:<program>``."""

import shlex
import sys
from dataclasses import dataclass

from vtbench.agents.base import AgentContext


@dataclass(frozen=True)
class NoopAgent:
    """Submits the initial system unchanged: its gain is exactly zero by construction."""

    name: str = "noop"
    needs_gateway: bool = False
    needs_playbook: bool = False

    def command(self, context: AgentContext) -> list[str]:
        return [sys.executable, "-m", "vtbench", "submit", "--model", "models/initial"]

    def environment(self, context: AgentContext) -> dict[str, str]:
        return {}


@dataclass(frozen=True)
class ReferenceAgent:
    """The built-in scripted co-design agent (:mod:`vtbench.agents.reference_agent`)."""

    name: str = "reference"
    needs_gateway: bool = False
    needs_playbook: bool = True

    def command(self, context: AgentContext) -> list[str]:
        return [sys.executable, "-m", "vtbench.agents.reference_agent", "--seed", str(context.seed)]

    def environment(self, context: AgentContext) -> dict[str, str]:
        return {}


@dataclass(frozen=True)
class CommandAgent:
    """Any program: ``command:<program and arguments>``, run through the shell in /workspace."""

    program: str
    needs_gateway: bool = False
    needs_playbook: bool = False

    @property
    def name(self) -> str:
        return f"command:{self.program}"

    def command(self, context: AgentContext) -> list[str]:
        return ["/bin/sh", "-c", self.program]

    def environment(self, context: AgentContext) -> dict[str, str]:
        return {"VTBENCH_PROMPT": context.prompt, "VTBENCH_SEED": str(context.seed)}

    def __str__(self) -> str:
        return shlex.quote(self.program)
