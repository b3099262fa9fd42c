"""Leaderboard means, Student t intervals, agent keys, cost, paired differences and the
published-style table."""

from pathlib import Path

import numpy as np
import pytest

from vtbench.analysis.leaderboard import build_leaderboard, published_table
from vtbench.analysis.loading import load_episodes
from vtbench.analysis.metrics import EpisodeMetrics
from vtbench.analysis.report import leaderboard_table
from vtbench.analysis.synthetic import make_episodes
from vtbench.intervals import mean_ci, stratified_ci, t_quantile


@pytest.fixture(scope="module")
def metrics(tmp_path_factory: pytest.TempPathFactory) -> list[EpisodeMetrics]:
    root = tmp_path_factory.mktemp("runs")
    make_episodes(root, ["reference", "noop"], ["arith", "textfix"], [0, 1, 2])
    return [e.metrics for e in load_episodes([root])]


@pytest.mark.parametrize(("df", "textbook"), [(1, 12.706), (2, 4.303), (4, 2.776),
                                               (9, 2.262), (29, 2.045)])
def test_the_t_quantile_matches_the_textbook_table(df: int, textbook: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(textbook, abs=1e-3)


def test_the_interval_is_the_student_t_interval_of_the_mean() -> None:
    values = [0.1, 0.25, 0.05]
    mean, ci = mean_ci(values)
    half = 4.303 * np.std(values, ddof=1) / np.sqrt(3)
    assert mean is not None and ci == pytest.approx([mean - half, mean + half], abs=1e-4)


def test_over_three_seeds_the_interval_keeps_its_coverage() -> None:
    rng = np.random.default_rng(7)
    draws = rng.normal(0.1, 0.05, size=(2000, 3))
    covered = 0
    for values in draws:
        _, ci = mean_ci(list(values))
        assert ci is not None
        covered += ci[0] <= 0.1 <= ci[1]
    assert 0.935 <= covered / len(draws) <= 0.965


def test_one_episode_gives_no_interval() -> None:
    assert mean_ci([0.2]) == (0.2, None)
    assert mean_ci([]) == (None, None)
    assert stratified_ci([[0.1, 0.2], [0.3]]) == (pytest.approx(0.225), None)


def test_the_aggregate_interval_of_equal_tasks_pools_their_degrees_of_freedom() -> None:
    mean, ci = stratified_ci([[0.0, 1.0], [0.0, 1.0]])
    half = t_quantile(0.975, 2) * np.sqrt(0.5 / 2 * 2) / 2
    assert mean == 0.5 and ci == pytest.approx([0.5 - half, 0.5 + half], abs=1e-4)


def test_rows_are_per_agent_and_task_with_seed_counts(metrics: list[EpisodeMetrics]) -> None:
    board = build_leaderboard(metrics)
    assert [(r.agent, r.task, r.n) for r in board.rows] == [
        ("noop", "arith", 3), ("noop", "textfix", 3),
        ("reference", "arith", 3), ("reference", "textfix", 3)]
    noop = board.row("noop", "arith")
    assert noop is not None and noop.gain_mean == 0 and noop.gain_ci == [0.0, 0.0]
    assert board.method == "Student t" and board.warnings
    assert "fewer than 5 seeds" in board.warnings[0]
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
    assert headers == ["task", "initial", "noop", "reference", "reference system",
                       "light / ref gain (task)"]
    arith = rows[0]
    assert arith[0] == "arith"
    assert arith[2] == f"{arith[1]} → {arith[1]} (+0.000)"
    assert arith[3].startswith(f"{arith[1]} → ") and "(+0." in arith[3]
    assert float(arith[4]) > float(arith[1])
    light, reference = (float(g) for g in arith[5].split(" / "))
    assert reference == pytest.approx(float(arith[4]) - float(arith[1]), abs=1e-3)
    assert light == pytest.approx(0.3 * reference, abs=1e-3)


def test_each_agents_gain_stands_beside_the_tasks_light_and_reference_gains(
        metrics: list[EpisodeMetrics]) -> None:
    headers, rows = leaderboard_table(build_leaderboard(metrics))
    gain, light, reference = (headers.index(h) for h in (
        "gain", "task: light gain", "task: ref gain"))
    assert (light, reference) == (gain + 2, gain + 3)
    arith = [row for row in rows if row[1] == "arith"]
    assert {row[light] for row in arith} == {arith[0][light]} != {"–"}
    assert float(arith[0][light]) == pytest.approx(0.3 * float(arith[0][reference]), abs=2e-3)


def test_synthetic_records_without_history_still_rank(tmp_path: Path) -> None:
    make_episodes(tmp_path, ["reference"], ["arith"], [0, 1], with_history=False)
    board = build_leaderboard([e.metrics for e in load_episodes([tmp_path])])
    assert board.rows[0].n == 2 and board.rows[0].codesign_rate is None
    assert board.rows[0].gain_mean is not None and board.rows[0].gain_mean > 0


def test_two_models_behind_one_agent_are_two_rows(metrics: list[EpisodeMetrics]) -> None:
    llm = [m.model_copy(update={"agent": "claude-code", "model": model,
                                "reasoning_effort": "high"})
           for m in metrics if m.agent == "noop" for model in ("opus", "sonnet")]
    board = build_leaderboard(llm)
    assert board.agents == ["claude-code (opus, effort high)",
                            "claude-code (sonnet, effort high)"]


def test_the_aggregate_is_sorted_by_gain_and_carries_the_cost(
        metrics: list[EpisodeMetrics]) -> None:
    board = build_leaderboard(metrics)
    assert [a.agent for a in board.aggregate] == ["reference", "noop"]
    reference = board.aggregate[0]
    dollars = [m.budget.llm_dollars for m in metrics if m.agent == "reference"]
    assert reference.dollars_total == pytest.approx(sum(dollars))
    assert reference.cost.dollars == pytest.approx(np.mean(dollars))
    assert 0 < reference.cost.cached_input_tokens < reference.cost.input_tokens


def test_paired_differences_use_only_the_seeds_both_agents_ran(
        metrics: list[EpisodeMetrics]) -> None:
    kept = [m for m in metrics if not (m.agent == "noop" and m.seed == 2)]
    board = build_leaderboard(kept)
    arith = next(p for p in board.paired if p.task == "arith")
    assert (arith.agent, arith.other, arith.seeds) == ("noop", "reference", [0, 1])
    gains = {(m.agent, m.seed): m.gain or 0.0 for m in kept if m.task == "arith"}
    assert arith.gain_difference_mean == pytest.approx(
        np.mean([gains[("noop", s)] - gains[("reference", s)] for s in (0, 1)]))
