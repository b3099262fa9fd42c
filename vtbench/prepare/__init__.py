"""Preparing tasks: private splits, the initial, reference and ablation systems, and
their scores, cached in the private store."""

from vtbench.prepare.prepare import (
    prepare_task,
    prepare_tasks,
    score_summary,
    task_scores,
)
from vtbench.prepare.prepared import PreparedTask, load_prepared, prepared_by_id
from vtbench.prepare.systems import SYSTEMS, SystemPlan

__all__ = ["SYSTEMS", "PreparedTask", "SystemPlan", "load_prepared", "prepare_task",
           "prepare_tasks", "prepared_by_id", "score_summary", "task_scores"]
