"""Research-agent adapters: how each agent is started inside the research sandbox.

An adapter turns an :class:`AgentContext` (task, budget, model settings, where the grader
and gateway are reachable inside the sandbox) into a command line and environment. The
runner does the rest (sandbox, deadline, finalisation), so an adapter is a few lines.
"""

from vtbench.agents.base import AgentAdapter, AgentContext
from vtbench.agents.resolve import AGENTS, get_agent

__all__ = ["AGENTS", "AgentAdapter", "AgentContext", "get_agent"]
