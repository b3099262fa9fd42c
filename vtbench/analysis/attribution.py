"""Where each agent's gain came from, over a campaign, read from the records'
``attribution`` sections (``vtbench attribute``), beside what its behaviour suggests.

Per agent: the episodes attributed, those not reproducible, the mean Shapley share of
the gain from data, trainer and harness (over the episodes whose gain is not 0), and the
mean test gain split into each change alone and the interaction (these add up to the mean
gain: the figure stacks them). The behaviour rate beside it is the share of iterations that
touched at least two components, which an agent can earn by editing a comment.
"""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vtbench.analysis.leaderboard import agent_key
from vtbench.episode.retrained import COMPONENT_KEYS

if TYPE_CHECKING:
    from vtbench.analysis.loading import Episode

PARTS = (*COMPONENT_KEYS, "interaction")


@dataclass
class AgentAttribution:
    agent: str
    attributed: int = 0
    not_reproducible: int = 0
    shares: dict[str, float | None] = field(default_factory=dict)
    """Mean Shapley share of the gain per component (episodes with a gain only)."""
    parts: dict[str, float] = field(default_factory=dict)
    """Mean test gain from each change alone and from the interaction."""
    codesign_rate: float | None = None


def by_agent(episodes: Sequence["Episode"]) -> list[AgentAttribution]:
    """One row per agent that has an attribution (in the order agents first appear)."""
    groups: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        if episode.record.attribution is not None:
            groups[agent_key(episode.metrics)].append(episode)
    return [_row(agent, group) for agent, group in groups.items()]


def _row(agent: str, group: list["Episode"]) -> AgentAttribution:
    done = [e.record.attribution for e in group if e.record.attribution is not None
            and e.record.attribution.status == "attributed"]
    row = AgentAttribution(agent=agent, attributed=len(done), not_reproducible=sum(
        1 for e in group if e.record.attribution is not None
        and e.record.attribution.status == "not reproducible"))
    gains = [a for a in done if a.gain]
    for name in COMPONENT_KEYS:
        values = [getattr(a.shapley, name) / a.gain for a in gains if a.gain]
        row.shares[name] = sum(values) / len(values) if values else None
        row.parts[name] = sum(getattr(a.alone, name) for a in done) / len(done) if done else 0.0
    row.parts["interaction"] = sum(a.interaction for a in done) / len(done) if done else 0.0
    rates = [e.metrics.codesign_rate for e in group if e.metrics.codesign_rate is not None]
    row.codesign_rate = sum(rates) / len(rates) if rates else None
    return row


def attribution_table(rows: Sequence[AgentAttribution]) -> tuple[list[str], list[list[str]]]:
    headers = ["agent", "attributed", "not reproducible", "share D", "share T", "share H",
               "interaction (gain)", "co-design rate"]

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    return headers, [[r.agent, str(r.attributed), str(r.not_reproducible),
                      *(pct(r.shares.get(c)) for c in COMPONENT_KEYS),
                      f"{r.parts.get('interaction', 0.0):+.3f}", pct(r.codesign_rate)]
                     for r in rows]
