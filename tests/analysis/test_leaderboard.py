"""Leaderboard means, bootstrap intervals and the published-style table."""

from pathlib import Path

import numpy as np
import pytest

from vtbench.analysis.leaderboard import (
    bootstrap_means,
    build_leaderboard,
    mean_ci,
    published_table,
)
from vtbench.analysis.loading import load_episodes
from vtbench.analysis.metrics import EpisodeMetrics
from vtbench.analysis.synthetic import make_episodes


@pytest.fixture(scope="module")
def metrics(tmp_path_factory: pytest.TempPathFactory) -> list[EpisodeMetrics]:
    root = tmp_path_factory.mktemp("runs")
    make_episodes(root, ["reference", "noop"], ["arith", "textfix"], [0, 1, 2])
    return [e.metrics for e in load_episodes([root])]


def test_interval_is_deterministic_and_brackets_the_mean() -> None:
    values = [0.1, 0.25, 0.05, 0.3, 0.2]
    mean, ci = mean_ci(values)
    assert ci is not None and mean is not None
    assert ci[0] < mean < ci[1]
    assert min(values) <= ci[0] and ci[1] <= max(values)
    assert mean_ci(values) == (mean, ci)
    assert not np.array_equal(bootstrap_means(values, seed=1), bootstrap_means(values))


def test_one_episode_gives_a_degenerate_interval() -> None:
    assert mean_ci([0.2]) == (0.2, [0.2, 0.2])
    assert mean_ci([]) == (None, None)


def test_rows_are_per_agent_and_task_with_seed_counts(metrics: list[EpisodeMetrics]) -> None:
    board = build_leaderboard(metrics)
    assert [(r.agent, r.task, r.n) for r in board.rows] == [
        ("noop", "arith", 3), ("noop", "textfix", 3),
        ("reference", "arith", 3), ("reference", "textfix", 3)]
    noop = board.row("noop", "arith")
    assert noop is not None and noop.gain_mean == 0 and noop.gain_ci == [0.0, 0.0]
    assert noop.codesign_rate is None
    ref = board.row("reference", "arith")
    assert ref is not None and ref.gain_mean is not None and ref.gain_ci is not None
    assert ref.gain_mean > 0 and ref.gain_ci[0] <= ref.gain_mean <= ref.gain_ci[1]
    assert ref.codesign_rate == pytest.approx(0.5)
    assert ref.algorithm_change_rate == pytest.approx(0.25)


def test_aggregate_weighs_every_task_equally(metrics: list[EpisodeMetrics]) -> None:
    extra = [m.model_copy(update={"episode_id": f"x{i}", "gain": 1.0})
             for i, m in enumerate(metrics) if m.agent == "reference" and m.task == "arith"]
    board = build_leaderboard(metrics + extra)
    ref = next(a for a in board.aggregate if a.agent == "reference")
    arith, textfix = board.row("reference", "arith"), board.row("reference", "textfix")
    assert arith is not None and textfix is not None
    assert arith.n == 6 and ref.n == 9 and ref.tasks == 2
    assert ref.gain_mean == pytest.approx(((arith.gain_mean or 0) + (textfix.gain_mean or 0)) / 2)
    assert ref.gain_ci is not None and ref.gain_ci[0] <= ref.gain_mean <= ref.gain_ci[1]


def test_published_table_shows_initial_final_and_reference(
        metrics: list[EpisodeMetrics]) -> None:
    headers, rows = published_table(build_leaderboard(metrics))
    assert headers == ["task", "initial", "noop", "reference", "reference system"]
    arith = rows[0]
    assert arith[0] == "arith"
    assert arith[2] == f"{arith[1]} → {arith[1]} (+0.000)"
    assert arith[3].startswith(f"{arith[1]} → ") and "(+0." in arith[3]
    assert float(arith[4]) > float(arith[1])


def test_synthetic_records_without_history_still_rank(tmp_path: Path) -> None:
    make_episodes(tmp_path, ["reference"], ["arith"], [0, 1], with_history=False)
    board = build_leaderboard([e.metrics for e in load_episodes([tmp_path])])
    assert board.rows[0].n == 2 and board.rows[0].codesign_rate is None
    assert board.rows[0].gain_mean is not None and board.rows[0].gain_mean > 0
