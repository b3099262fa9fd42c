"""``vtbench prepare``, ``vtbench eval`` and ``vtbench pretrain``: the operator's side."""

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from vtbench.cli.options import JsonFlag
from vtbench.cli.output import console, err_console, print_json, print_table
from vtbench.errors import VtbenchError
from vtbench.printable import printable
from vtbench.tasks import Task, builtin_tasks, find_task


def scores_rows(scores: list[dict]) -> list[list[object]]:
    components = ("data", "trainer", "harness")
    rows = [[s["initial"]["val"], s["initial"]["test"], s["reference"]["val"],
             s["reference"]["test"], *(s["ablations"][c] for c in components),
             *(s["leave_one_out"][c] for c in components)] for s in scores]
    return [[s["task"] if s["current"] else f"{s['task']} (stale)",
             *(f"{v:.3f}" if v is not None else None for v in row), *margin_cells(s["margin"])]
            for s, row in zip(scores, rows, strict=True)]


def gain_text(gain: dict) -> str | None:
    """``+0.250 [+0.101, +0.399]``: a mean test gain and its interval; None if unmeasured."""
    if gain["gain"] is None:
        return None
    interval = gain["interval"]
    bounds = f" [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else ""
    return f"{gain['gain']:+.3f}{bounds}"


def margin_cells(margin: dict) -> list[str | None]:
    share = margin["margin"]
    return [gain_text(margin["light"]), gain_text(margin["reference"]),
            None if share is None else f"{share:.2f}", str(margin["seeds"] or "") or None]


SCORE_COLUMNS = ["task", "init val", "init test", "ref val", "ref test",
                 "only D", "only T", "only H", "ref -D", "ref -T", "ref -H",
                 "light gain", "ref gain", "margin", "seeds"]
"""Beyond the first five: val means of the initial system with one component's change
(only X) and of the reference with one change reverted (ref -X); then the co-design
margin: the light and reference systems' test gains over the initial system (mean over
seeds, 95 % Student t interval), the share of the reference's gain the light system does
not reach, and how many seeds measured it; '-' where not measured. A task prepared from
another version of it is marked stale."""


def prepare(
    task: Annotated[
        list[str] | None, typer.Option("--task", "-t", help="Task id (repeatable).")
    ] = None,
    scale: Annotated[str, typer.Option(help="Prepare every built-in task of this scale.")] = "tiny",
    seeds: Annotated[int, typer.Option(min=1, help="Training seeds per system (spread).")] = 1,
    workers: Annotated[int, typer.Option(min=1, help="Parallel one-thread trainings.")] = 2,
    sandbox: Annotated[str, typer.Option(help="Harness sandbox backend.")] = "bwrap",
    calibrate: Annotated[bool, typer.Option(
        help="Also build the ablations the calibration table shows (each component's change "
             "alone, and reverted from the reference); episodes need only initial and "
             "reference.")] = False,
    system: Annotated[list[str] | None, typer.Option(
        help="With --calibrate: build only this one of its systems (repeatable; "
             "initial and reference always), e.g. --system light after the light agent "
             "changed.")] = None,
    download: Annotated[bool, typer.Option(
        help="Download a hub base model missing from the Hugging Face cache (safetensors "
             "only); without it nothing is downloaded.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Build splits, the initial and reference systems (with --calibrate also the
    ablations), and score them (cached)."""
    from vtbench.models.base import download_base, resolve_base
    from vtbench.prepare import prepare_tasks
    from vtbench.prepare.progress import log_reporter
    from vtbench.prepare.systems import CALIBRATION_SYSTEMS

    only = calibration_systems(system, calibrate, CALIBRATION_SYSTEMS)
    tasks = [find_task(t) for t in task] if task else [
        t for t in builtin_tasks() if t.spec.scale == scale]
    if not tasks:
        raise VtbenchError(f"no built-in task has scale {scale!r}")
    for each in tasks:  # a missing base model stops here, before any work is done
        if download:
            download_base(each.spec.base_model,
                          lambda line: err_console.print(line, highlight=False))
        resolve_base(each.spec.base_model)
    started = time.monotonic()
    with Progress(TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                  console=err_console, transient=as_json) as progress:
        lines: dict[str, TaskID] = {}
        to_log = log_reporter(lambda text: err_console.print(text, highlight=False))

        def report(job: str, line: str) -> None:
            if not err_console.is_terminal:
                to_log(job, line)
                return
            if job not in lines:
                lines[job] = progress.add_task(job)
            progress.update(lines[job], description=f"{job}: {printable(line, 70)}")

        results = prepare_tasks(tasks, seeds=tuple(range(seeds)), workers=workers,
                                report=report, sandbox=sandbox, calibrate=calibrate,
                                only=only)
        audit_runtimes(tasks, report)
    if as_json:
        print_json(results)
        return
    print_table("prepared tasks", SCORE_COLUMNS, scores_rows(results))
    console.print(f"prepared {len(tasks)} task(s) in {time.monotonic() - started:.0f} s")


def calibration_systems(named: list[str] | None, calibrate: bool,
                        known: tuple[str, ...]) -> tuple[str, ...]:
    """The calibration systems ``--system`` names (all of them when it names none)."""
    if not named:
        return known
    if not calibrate:
        raise VtbenchError("--system chooses among the calibration's systems: add --calibrate")
    unknown = sorted(set(named) - set(known))
    if unknown:
        raise VtbenchError(f"no calibration system is called {', '.join(unknown)}",
                           hint=f"choose among: {', '.join(known)}")
    return tuple(named)


def audit_runtimes(tasks: list[Task], report: Callable[[str, str], None]) -> None:
    """Leak-audit the sandbox runtime and the models every workspace starts with for each
    task now, so that episodes start at once."""
    from vtbench.episode.leak_audit import audit_runtime, workspace_copies
    from vtbench.prepare import load_prepared

    for task in tasks:
        report(f"{task.id}/leak-audit", "searching the sandbox runtime for split data")
        files = audit_runtime(task, workspace_copies(load_prepared(task)).values())
        report(f"{task.id}/leak-audit", f"done ({files} files)")


def eval_command(
    task: Annotated[str, typer.Option("--task", "-t", help="Task id or path.")],
    model: Annotated[Path, typer.Option(help="Model directory (HF checkpoint, safetensors).")],
    split: Annotated[str, typer.Option(help="val or test.")] = "val",
    harness: Annotated[Path | None, typer.Option(help="Harness folder (editable tasks).")] = None,
    sandbox: Annotated[str, typer.Option(help="Harness sandbox backend.")] = "bwrap",
    as_json: JsonFlag = False,
) -> None:
    """Score a model (and harness) on a prepared task's split (operator side)."""
    from vtbench.evaluation import evaluate
    from vtbench.tasks.store import ensure_splits

    if split not in ("val", "test"):
        raise VtbenchError(f"unknown split {split!r}", hint="use val or test")
    loaded = find_task(task)
    ensure_splits(loaded)
    columns = (TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as progress:
        bar = progress.add_task("eval", total=None)
        result = evaluate(loaded, model, split, harness_dir=harness, sandbox=sandbox,
                          on_progress=lambda done, total: progress.update(bar, completed=done,
                                                                          total=total))
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    errors = sum(1 for i in result.instances if i.error)
    console.print(f"{loaded.id} {split}: score {result.score:.4f} over {result.n} instances "
                  f"({result.harness} harness, {errors} instance errors, "
                  f"{result.timings['wall']:.1f} s)")
    if result.error:
        console.print(f"harness error: {printable(result.error)}", style="red")


def pretrain(
    out: Annotated[Path | None, typer.Option(help="Output folder.")] = None,
    steps: Annotated[int, typer.Option(min=1)] = 2400,
    seed: Annotated[int, typer.Option()] = 0,
    install: Annotated[bool, typer.Option(help="Use the result as the tiny base model.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Pre-train the shared tiny base model from generic synthetic and local text."""
    from vtbench.models.base import installed_tiny_base
    from vtbench.models.pretrain import pretrain as run_pretraining

    target = installed_tiny_base() if install else out
    if target is None:
        raise VtbenchError("say where to write the model", hint="pass --out DIR or --install")
    columns = (TextColumn("pre-training"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("loss {task.fields[loss]:.3f}"))
    with Progress(*columns, console=err_console) as progress:
        bar = progress.add_task("pretrain", total=steps, loss=float("nan"))
        record = run_pretraining(target, steps=steps, seed=seed, on_step=lambda step, loss:
                                 progress.update(bar, completed=step + 1, loss=loss))
    if as_json:
        print_json({**record, "path": str(target)})
    else:
        console.print(f"saved {target} ({record['parameters']} parameters)")
