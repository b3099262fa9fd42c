"""The leaderboard: per agent × task means with 95% bootstrap intervals, and an aggregate.

Intervals are percentile bootstraps of the mean over episodes (seeds): 2,000 resamples
from ``numpy.random.default_rng(0)``, so the same episodes always give the same table.
One episode gives a degenerate interval [x, x]. The aggregate across tasks weighs every
task equally: its mean is the mean of the per-task means, and its interval resamples the
episodes within each task (a stratified bootstrap) before averaging the task means.
Behavioural rates are means over the episodes whose history could be classified.
"""

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from pydantic import Field

from vtbench.analysis.changes import Strict
from vtbench.analysis.metrics import EpisodeMetrics

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95


class LeaderboardRow(Strict):
    agent: str
    task: str
    n: int
    """Episodes (seeds) of this agent on this task."""
    submitted_rate: float
    gain_mean: float | None
    gain_ci: list[float] | None
    """95% bootstrap interval [lo, hi] of the mean gain."""
    normalized_gain_mean: float | None
    normalized_gain_ci: list[float] | None
    initial_test: float | None
    final_test_mean: float | None
    reference_test: float | None
    codesign_rate: float | None
    full_codesign_rate: float | None
    algorithm_change_rate: float | None
    improvement_share: float | None
    val_test_gap: float | None
    validations_used: float


class AggregateRow(Strict):
    agent: str
    tasks: int
    n: int
    gain_mean: float | None
    gain_ci: list[float] | None
    normalized_gain_mean: float | None
    normalized_gain_ci: list[float] | None
    codesign_rate: float | None
    algorithm_change_rate: float | None


class Leaderboard(Strict):
    rows: list[LeaderboardRow] = Field(default_factory=list)
    aggregate: list[AggregateRow] = Field(default_factory=list)
    resamples: int = RESAMPLES
    seed: int = SEED
    level: float = LEVEL

    @property
    def agents(self) -> list[str]:
        return sorted({row.agent for row in self.rows})

    @property
    def tasks(self) -> list[str]:
        return sorted({row.task for row in self.rows})

    def row(self, agent: str, task: str) -> LeaderboardRow | None:
        return next((r for r in self.rows if r.agent == agent and r.task == task), None)


def bootstrap_means(values: Sequence[float], resamples: int = RESAMPLES,
                    seed: int = SEED) -> np.ndarray:
    """``resamples`` means of resamples (with replacement) of ``values``."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(data), size=(resamples, len(data)))
    means: np.ndarray = data[picks].mean(axis=1)
    return means


def interval(means: np.ndarray, level: float = LEVEL) -> list[float]:
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return [float(lo), float(hi)]


def mean_ci(values: Sequence[float]) -> tuple[float | None, list[float] | None]:
    if not values:
        return None, None
    return float(np.mean(values)), interval(bootstrap_means(values))


def build_leaderboard(episodes: Sequence[EpisodeMetrics]) -> Leaderboard:
    cells: dict[tuple[str, str], list[EpisodeMetrics]] = defaultdict(list)
    for episode in episodes:
        cells[(episode.agent, episode.task)].append(episode)
    board = Leaderboard(rows=[_row(agent, task, cells[(agent, task)])
                              for agent, task in sorted(cells)])
    by_agent: dict[str, dict[str, list[EpisodeMetrics]]] = defaultdict(dict)
    for (agent, task), group in cells.items():
        by_agent[agent][task] = group
    board.aggregate = [_aggregate(agent, by_agent[agent]) for agent in sorted(by_agent)]
    return board


def _values(group: Sequence[EpisodeMetrics], field: str) -> list[float]:
    return [v for e in group if (v := getattr(e, field)) is not None]


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _row(agent: str, task: str, group: list[EpisodeMetrics]) -> LeaderboardRow:
    gain, gain_ci = mean_ci(_values(group, "gain"))
    norm, norm_ci = mean_ci(_values(group, "normalized_gain"))
    return LeaderboardRow(
        agent=agent, task=task, n=len(group),
        submitted_rate=sum(e.submitted for e in group) / len(group),
        gain_mean=gain, gain_ci=gain_ci, normalized_gain_mean=norm, normalized_gain_ci=norm_ci,
        initial_test=_mean(_values(group, "initial_test")),
        final_test_mean=_mean(_values(group, "final_test")),
        reference_test=_mean(_values(group, "reference_test")),
        codesign_rate=_mean(_values(group, "codesign_rate")),
        full_codesign_rate=_mean(_values(group, "full_codesign_rate")),
        algorithm_change_rate=_mean(_values(group, "algorithm_change_rate")),
        improvement_share=_mean(_values(group, "improvement_share")),
        val_test_gap=_mean(_values(group, "val_test_gap")),
        validations_used=float(np.mean([e.validations_used for e in group])),
    )


def _stratified(tasks: dict[str, list[EpisodeMetrics]],
                field: str) -> tuple[float | None, list[float] | None]:
    per_task = [values for group in tasks.values() if (values := _values(group, field))]
    if not per_task:
        return None, None
    mean = float(np.mean([np.mean(values) for values in per_task]))
    draws = np.mean([bootstrap_means(values, seed=SEED + i)
                     for i, values in enumerate(per_task)], axis=0)
    return mean, interval(draws)


def _aggregate(agent: str, tasks: dict[str, list[EpisodeMetrics]]) -> AggregateRow:
    ordered = {task: tasks[task] for task in sorted(tasks)}
    gain, gain_ci = _stratified(ordered, "gain")
    norm, norm_ci = _stratified(ordered, "normalized_gain")
    rates = {field: _mean([v for group in ordered.values() if (v := _mean(_values(group, field)))
                           is not None])
             for field in ("codesign_rate", "algorithm_change_rate")}
    return AggregateRow(agent=agent, tasks=len(ordered),
                        n=sum(len(group) for group in ordered.values()),
                        gain_mean=gain, gain_ci=gain_ci, normalized_gain_mean=norm,
                        normalized_gain_ci=norm_ci, **rates)


def published_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    """Rows per task: ``initial → final`` per agent (mean over seeds), then the reference."""
    headers = ["task", "initial", *board.agents, "reference system"]
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
                       f" ({_signed(cell.gain_mean)})")
        rows.append([*row, _fmt(reference)])
    return headers, rows


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3f}"
