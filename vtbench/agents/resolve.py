"""Picking an agent adapter by name; a miss lists the valid names."""

from collections.abc import Callable
from functools import partial

from vtbench.agents.base import AgentAdapter
from vtbench.agents.builtin import CommandAgent, NoopAgent, ReferenceAgent
from vtbench.agents.llm import LLM_AGENTS
from vtbench.agents.scripted import ScriptedAgent
from vtbench.errors import VtbenchError

AGENTS: dict[str, Callable[[], AgentAdapter]] = {
    "noop": NoopAgent,
    "reference": ReferenceAgent,
    "filter": partial(ScriptedAgent, "filter", "vtbench.agents.filter_agent"),
    "tuner": partial(ScriptedAgent, "tuner", "vtbench.agents.tuner_agent"),
    "light": partial(ScriptedAgent, "light", "vtbench.agents.light_agent"),
    **LLM_AGENTS,
}


class UnknownAgent(VtbenchError):
    exit_code = 2


def get_agent(name: str) -> AgentAdapter:
    if name.startswith("command:"):
        program = name.removeprefix("command:").strip()
        if not program:
            raise UnknownAgent("command: needs a program, e.g. command:./my_agent.sh")
        return CommandAgent(program)
    if name not in AGENTS:
        valid = ", ".join([*AGENTS, "command:<program>"])
        raise UnknownAgent(f"unknown agent {name!r}", hint=f"valid agents: {valid}")
    return AGENTS[name]()
