"""Trajectory analysis: what each snapshot changed, episode metrics, leaderboard, report.

Reads only episode records (``episode.json``) and the workspace snapshot repositories they
name; never the private store. Importing this package imports no matplotlib (figures are
drawn only when a report is rendered).
"""

from vtbench.analysis.changes import (
    ChangeKind,
    Component,
    ComponentChange,
    DataRows,
    FileChange,
    SnapshotChange,
    classify,
)
from vtbench.analysis.export import Trajectory, read_trajectory, trajectory, write_trajectories
from vtbench.analysis.gitstore import SnapshotStore
from vtbench.analysis.history import (
    EpisodeHistory,
    Step,
    episode_history,
    load_history,
    write_history,
)
from vtbench.analysis.leaderboard import Leaderboard, LeaderboardRow, build_leaderboard
from vtbench.analysis.loading import Episode, load_episode, load_episodes
from vtbench.analysis.metrics import EpisodeMetrics, episode_metrics
from vtbench.analysis.report import Report, build_report, json_rows, render_html, render_markdown

__all__ = [
    "ChangeKind", "Component", "ComponentChange", "DataRows", "Episode", "EpisodeHistory",
    "EpisodeMetrics", "FileChange", "Leaderboard", "LeaderboardRow", "Report",
    "SnapshotChange", "SnapshotStore", "Step", "Trajectory", "build_leaderboard",
    "build_report", "classify", "episode_history", "episode_metrics", "json_rows",
    "load_episode", "load_episodes", "load_history", "read_trajectory", "render_html",
    "render_markdown", "trajectory", "write_history", "write_trajectories",
]
