"""Trusted scoring: matches harness outputs to items by id and applies the task's scorer.

Runs in the operator's process after the harness has exited; it is the only code that
reads labels. A missing or malformed output scores 0 with its error recorded: parsing is
bounded (line length, JSON nesting), so nothing a harness writes makes it raise. A scorer
that raises on a well-formed output is a fault of the trusted side, not of the candidate:
:class:`~vtbench.errors.ScorerError` ends the evaluation (the grader refunds it); a scorer
that cannot run the candidate's code sandboxed (:class:`SandboxUnavailable`) is the host's
failure too and propagates as it is.
"""

import json
from typing import Any

from vtbench import boundedjson
from vtbench.errors import SandboxUnavailable, ScorerError
from vtbench.evaluation.result import InstanceResult
from vtbench.tasks.registry import Task

MAX_OUTPUT_CHARS = 20_000
MAX_TRAJECTORY_CHARS = 200_000
MAX_LINE_CHARS = 4 * (MAX_OUTPUT_CHARS + MAX_TRAJECTORY_CHARS)
"""Longer output lines are skipped unread (a truncated trajectory fits well within)."""


def parse_outputs(text: str) -> dict[str, dict[str, Any]]:
    """Harness output lines by id; the first line for an id wins; junk, overlong and too
    deeply nested lines are skipped."""
    outputs: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if len(line) > MAX_LINE_CHARS:
            continue
        try:
            entry = boundedjson.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            outputs.setdefault(entry["id"], entry)
    return outputs


def bounded_trajectory(trajectory: Any) -> Any:
    text = json.dumps(trajectory, default=str)
    if len(text) <= MAX_TRAJECTORY_CHARS:
        return trajectory
    return {"truncated": True, "head": text[:MAX_TRAJECTORY_CHARS]}


def score_instance(
    task: Task, item: dict[str, Any], entry: dict[str, Any] | None
) -> InstanceResult:
    base = {"id": item["id"], "input": item["input"]}
    if entry is None:
        return InstanceResult(**base, output=None, score=0.0, error="no output")
    output = entry.get("output")
    trajectory = bounded_trajectory(entry.get("trajectory"))
    if not isinstance(output, str):
        return InstanceResult(**base, output=None, trajectory=trajectory, score=0.0,
                              error="output is not a string")
    if len(output) > MAX_OUTPUT_CHARS:
        return InstanceResult(**base, output=output[:MAX_OUTPUT_CHARS], trajectory=trajectory,
                              score=0.0, error=f"output longer than {MAX_OUTPUT_CHARS} characters")
    try:
        value = float(task.scorer.score(item, output))
    except SandboxUnavailable:
        raise
    except Exception as err:
        raise ScorerError(f"the scorer of {task.id} raised {type(err).__name__} on "
                          f"instance {item['id']}") from err
    return InstanceResult(**base, output=output, trajectory=trajectory,
                          score=min(1.0, max(0.0, value)))


def score_outputs(task: Task, items: list[dict[str, Any]], text: str) -> list[InstanceResult]:
    outputs = parse_outputs(text)
    return [score_instance(task, item, outputs.get(item["id"])) for item in items]
