"""Preparing tasks: private splits, the initial, reference and ablation systems, and
their scores, cached in the private store."""

from vtbench.prepare.prepare import (
    prepare_task,
    prepare_tasks,
    score_summary,
    task_scores,
)
from vtbench.prepare.systems import SYSTEMS, SystemPlan

__all__ = ["SYSTEMS", "SystemPlan", "prepare_task", "prepare_tasks", "score_summary", "task_scores"]
