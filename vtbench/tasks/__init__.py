"""Task packs: loading, the trusted task code (builder, scorer, reference), private splits."""

from vtbench.tasks.registry import Task, builtin_tasks, find_task, load_task

__all__ = ["Task", "builtin_tasks", "find_task", "load_task"]
