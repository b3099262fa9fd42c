"""``vtbench tasks``: list, show, validate and score task packs."""

from pathlib import Path
from typing import Annotated

import typer

from vtbench.cli.options import JsonFlag
from vtbench.cli.output import console, print_json, print_table
from vtbench.tasks import builtin_tasks, find_task, load_task

app = typer.Typer(help="List, inspect and validate task packs.", no_args_is_help=True)


@app.command("list")
def list_tasks(as_json: JsonFlag = False) -> None:
    """List the built-in tasks."""
    rows = [
        {"id": t.id, "title": t.spec.title, "scale": t.spec.scale,
         "harness_editable": t.spec.harness_editable, "metric": t.spec.metric.name}
        for t in builtin_tasks()
    ]
    if as_json:
        print_json(rows)
        return
    print_table("tasks", ["id", "title", "scale", "harness editable", "metric"],
                [list(r.values()) for r in rows])


@app.command("show")
def show(task_id: str, as_json: JsonFlag = False) -> None:
    """Show one task's spec."""
    task = find_task(task_id)
    if as_json:
        print_json(task.spec.model_dump(mode="json"))
        return
    console.print_json(task.spec.model_dump_json())


@app.command("validate")
def validate(path: Path, as_json: JsonFlag = False) -> None:
    """Validate a task pack folder or task.toml; exit 2 with one line on a bad spec."""
    task = load_task(path)
    if as_json:
        print_json({"id": task.id, "valid": True, "path": str(task.root)})
    else:
        console.print(f"{task.root}/task.toml: valid task {task.id!r}")


@app.command("scores")
def scores(
    task: Annotated[list[str] | None, typer.Option(
        "--task", "-t", help="Task id or task pack folder (repeatable); default: every "
                             "prepared built-in task.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Initial, reference and ablation scores of every prepared task (or of those named)."""
    from vtbench.cli.prepare import SCORE_COLUMNS, scores_rows
    from vtbench.errors import NotPrepared
    from vtbench.prepare import task_scores
    from vtbench.prepare.prepare import scores_path

    chosen = [find_task(name) for name in task] if task else builtin_tasks()
    unprepared = [t for t in chosen if not scores_path(t).exists()]
    if task and unprepared:
        name = task[chosen.index(unprepared[0])]
        raise NotPrepared(f"task {unprepared[0].id!r} is not prepared",
                          hint=f"run: vtbench prepare --task {name}")
    rows = [task_scores(t) for t in chosen if t not in unprepared]
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("no task is prepared yet (run: vtbench prepare)")
        return
    print_table("task scores", SCORE_COLUMNS, scores_rows(rows))
