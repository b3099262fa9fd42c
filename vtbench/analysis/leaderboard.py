"""The leaderboard: per agent × task means with 95% Student t intervals, and an aggregate.

An agent is keyed by (agent, LLM model, reasoning effort): two models behind Claude Code
are two rows. Intervals are Student t intervals of the mean over episodes (seeds), see
:mod:`vtbench.analysis.intervals` for why not the bootstrap; one episode gives none. The
aggregate across tasks weighs every task equally: its mean is the mean of the per-task
means, its interval that of a mean of independent task means. Behavioural rates are
means over the episodes whose history could be classified. Cost is the gateway's metering
per episode (tokens, cached input tokens, dollars), averaged. Paired differences compare
two agents on the same task over the seeds both ran, which removes the seed's own effect.
"""

from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations

import numpy as np
from pydantic import Field

from vtbench.analysis.changes import Strict
from vtbench.analysis.metrics import EpisodeMetrics
from vtbench.intervals import FEW_SEEDS, LEVEL, METHOD, mean_ci, stratified_ci


class Cost(Strict):
    """Mean LLM cost per episode, as the gateway metered it."""

    dollars: float
    input_tokens: float
    cached_input_tokens: float
    output_tokens: float


class LeaderboardRow(Strict):
    agent: str
    """The agent's key: its name, with its LLM model and reasoning effort where it has them."""
    task: str
    n: int
    """Episodes (seeds) of this agent on this task."""
    submitted_rate: float
    gain_mean: float | None
    gain_ci: list[float] | None
    """95% Student t interval [lo, hi] of the mean gain; None for one episode."""
    normalized_gain_mean: float | None
    normalized_gain_ci: list[float] | None
    initial_test: float | None
    final_test_mean: float | None
    reference_test: float | None
    task_light_gain: float | None = None
    """The task's light system's test gain (its calibration's mean over seeds): what
    lightweight work reaches there."""
    task_reference_gain: float | None = None
    """The task's reference system's test gain over the same seeds."""
    codesign_rate: float | None
    full_codesign_rate: float | None
    episode_codesign_rate: float | None
    """Share of episodes that changed two or more components over all their steps."""
    algorithm_change_rate: float | None
    improvement_share: float | None
    val_test_gap: float | None
    validations_used: float
    cost: Cost
    shared: int = 0
    """Episodes of the cell that ran on shared cores (``--shared``): its results then
    depend on their neighbours, and the report says "shared" beside them."""


class AggregateRow(Strict):
    agent: str
    tasks: int
    n: int
    gain_mean: float | None
    gain_ci: list[float] | None
    normalized_gain_mean: float | None
    normalized_gain_ci: list[float] | None
    codesign_rate: float | None
    episode_codesign_rate: float | None
    algorithm_change_rate: float | None
    cost: Cost
    dollars_total: float


class PairedDifference(Strict):
    """``agent − other`` in test gain on one task, over the seeds both ran."""

    agent: str
    other: str
    task: str
    seeds: list[int]
    gain_difference_mean: float
    gain_difference_ci: list[float] | None


class Leaderboard(Strict):
    rows: list[LeaderboardRow] = Field(default_factory=list)
    aggregate: list[AggregateRow] = Field(default_factory=list)
    """Sorted by aggregate gain, best first."""
    paired: list[PairedDifference] = Field(default_factory=list)
    method: str = METHOD
    level: float = LEVEL

    @property
    def agents(self) -> list[str]:
        return sorted({row.agent for row in self.rows})

    @property
    def tasks(self) -> list[str]:
        return sorted({row.task for row in self.rows})

    def row(self, agent: str, task: str) -> LeaderboardRow | None:
        return next((r for r in self.rows if r.agent == agent and r.task == task), None)

    @property
    def warnings(self) -> list[str]:
        few = sorted({r.n for r in self.rows if r.n < FEW_SEEDS})
        if not few:
            return []
        return [f"some agent × task cells have only {', '.join(map(str, few))} seed(s): "
                f"intervals over fewer than {FEW_SEEDS} seeds are wide and rest on the gains "
                "being roughly normal; run more seeds before ranking close agents"]


def agent_key(episode: EpisodeMetrics) -> str:
    """``claude-code (opus-4, effort high)``; a built-in agent is just its name."""
    details = [part for part in (episode.model, episode.reasoning_effort and
                                 f"effort {episode.reasoning_effort}") if part]
    return f"{episode.agent} ({', '.join(details)})" if details else episode.agent


def build_leaderboard(episodes: Sequence[EpisodeMetrics]) -> Leaderboard:
    cells: dict[tuple[str, str], list[EpisodeMetrics]] = defaultdict(list)
    for episode in episodes:
        cells[(agent_key(episode), episode.task)].append(episode)
    board = Leaderboard(rows=[_row(agent, task, cells[(agent, task)])
                              for agent, task in sorted(cells)])
    by_agent: dict[str, dict[str, list[EpisodeMetrics]]] = defaultdict(dict)
    for (agent, task), group in cells.items():
        by_agent[agent][task] = group
    aggregate = [_aggregate(agent, by_agent[agent]) for agent in sorted(by_agent)]
    board.aggregate = sorted(aggregate, key=lambda a: -np.inf if a.gain_mean is None
                             else -a.gain_mean)
    board.paired = paired_differences(cells)
    return board


def paired_differences(
        cells: dict[tuple[str, str], list[EpisodeMetrics]]) -> list[PairedDifference]:
    """Every pair of agents on every task they share, over the seeds both ran."""
    pairs = []
    for task in sorted({task for _, task in cells}):
        agents = sorted(agent for agent, t in cells if t == task)
        for agent, other in combinations(agents, 2):
            mine = {e.seed: e.gain for e in cells[(agent, task)] if e.gain is not None}
            theirs = {e.seed: e.gain for e in cells[(other, task)] if e.gain is not None}
            seeds = sorted(mine.keys() & theirs.keys())
            if not seeds:
                continue
            mean, ci = mean_ci([mine[s] - theirs[s] for s in seeds])
            pairs.append(PairedDifference(agent=agent, other=other, task=task, seeds=seeds,
                                          gain_difference_mean=mean or 0.0,
                                          gain_difference_ci=ci))
    return pairs


def _episode_codesign(group: Sequence[EpisodeMetrics]) -> float | None:
    known = [len(e.episode_components) >= 2 for e in group if e.episode_components is not None]
    return sum(known) / len(known) if known else None


def _cost(group: Sequence[EpisodeMetrics]) -> Cost:
    budgets = [e.budget for e in group]
    return Cost(dollars=float(np.mean([b.llm_dollars for b in budgets])),
                input_tokens=float(np.mean([b.llm_input_tokens for b in budgets])),
                cached_input_tokens=float(np.mean([b.llm_cached_input_tokens for b in budgets])),
                output_tokens=float(np.mean([b.llm_output_tokens for b in budgets])))


def _values(group: Sequence[EpisodeMetrics], field: str) -> list[float]:
    return [v for e in group if (v := getattr(e, field)) is not None]


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _row(agent: str, task: str, group: list[EpisodeMetrics]) -> LeaderboardRow:
    gain, gain_ci = mean_ci(_values(group, "gain"))
    norm, norm_ci = mean_ci(_values(group, "normalized_gain"))
    return LeaderboardRow(
        agent=agent, task=task, n=len(group), shared=sum(e.shared for e in group),
        submitted_rate=sum(e.submitted for e in group) / len(group),
        gain_mean=gain, gain_ci=gain_ci, normalized_gain_mean=norm, normalized_gain_ci=norm_ci,
        initial_test=_mean(_values(group, "initial_test")),
        final_test_mean=_mean(_values(group, "final_test")),
        reference_test=_mean(_values(group, "reference_test")),
        task_light_gain=_mean(_values(group, "light_gain")),
        task_reference_gain=_mean(_values(group, "reference_gain")),
        codesign_rate=_mean(_values(group, "codesign_rate")),
        full_codesign_rate=_mean(_values(group, "full_codesign_rate")),
        episode_codesign_rate=_episode_codesign(group),
        algorithm_change_rate=_mean(_values(group, "algorithm_change_rate")),
        improvement_share=_mean(_values(group, "improvement_share")),
        val_test_gap=_mean(_values(group, "val_test_gap")),
        validations_used=float(np.mean([e.validations_used for e in group])),
        cost=_cost(group),
    )


def _stratified(tasks: dict[str, list[EpisodeMetrics]],
                field: str) -> tuple[float | None, list[float] | None]:
    return stratified_ci([_values(group, field) for group in tasks.values()])


def _aggregate(agent: str, tasks: dict[str, list[EpisodeMetrics]]) -> AggregateRow:
    ordered = {task: tasks[task] for task in sorted(tasks)}
    everything = [e for group in ordered.values() for e in group]
    gain, gain_ci = _stratified(ordered, "gain")
    norm, norm_ci = _stratified(ordered, "normalized_gain")
    rates = {field: _mean([v for group in ordered.values() if (v := _mean(_values(group, field)))
                           is not None])
             for field in ("codesign_rate", "algorithm_change_rate")}
    rates["episode_codesign_rate"] = _episode_codesign(everything)
    return AggregateRow(agent=agent, tasks=len(ordered), n=len(everything),
                        cost=_cost(everything),
                        dollars_total=sum(e.budget.llm_dollars for e in everything),
                        gain_mean=gain, gain_ci=gain_ci, normalized_gain_mean=norm,
                        normalized_gain_ci=norm_ci, **rates)


def published_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """Rows per task: ``initial → final`` per agent (mean over seeds), then the reference,
    then the task's light and reference systems' test gains from its calibration (what
    lightweight work reaches, and what co-design does)."""
    headers = ["task", "initial", *board.agents, "reference system", "light / ref gain (task)"]
    rows = []
    for task in board.tasks:
        cells = [board.row(agent, task) for agent in board.agents]
        initial = next((c.initial_test for c in cells if c and c.initial_test is not None), None)
        reference = next((c.reference_test for c in cells
                          if c and c.reference_test is not None), None)
        row = [task, _fmt(initial)]
        for cell in cells:
            row.append("–" if cell is None else
                       f"{_fmt(cell.initial_test)} → {_fmt(cell.final_test_mean)}"
                       f" ({_signed(cell.gain_mean)}{', shared' if cell.shared else ''})")
        rows.append([*row, _fmt(reference), _task_gains(cells)])
    return headers, rows


def _task_gains(cells: Sequence[LeaderboardRow | None]) -> str:
    light = next((c.task_light_gain for c in cells if c and c.task_light_gain is not None), None)
    reference = next((c.task_reference_gain for c in cells
                      if c and c.task_reference_gain is not None), None)
    return f"{_signed(light)} / {_signed(reference)}"


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3f}"
