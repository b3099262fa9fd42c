"""``vtbench run``: one research episode, end to end."""

import os
from pathlib import Path
from typing import Annotated

import typer

from vtbench.cli.options import JsonFlag
from vtbench.cli.output import console, err_console, print_json, print_table
from vtbench.episode.record import EpisodeRecord
from vtbench.errors import VtbenchError


def summary(record: "EpisodeRecord", record_path: Path) -> dict[str, object]:
    return {"task": record.task, "agent": record.agent, "seed": record.seed,
            "submitted": record.submitted, "initial_test": record.initial_test,
            "final_test": record.final_test, "reference_test": record.reference_test,
            "gain": record.gain, "normalized_gain": record.normalized_gain,
            "validations_used": record.validations_used, "stop_reason": record.stop_reason,
            "sandbox_limits": (record.provenance.sandbox_limits_detail or "unrecorded")
            + (", weak limits allowed" if record.provenance.weak_limits_allowed else ""),
            "reserved": reserved_line(record),
            "record_path": str(record_path),
            **({"attribution": record.attribution.status} if record.attribution else {})}


def reserved_line(record: "EpisodeRecord") -> str:
    """``cores 1; GPUs none (cpuset)``, with ``; shared`` where the cores were shared."""
    if record.spec is None or record.spec.reservation is None:
        return "unrecorded"
    held_by = record.provenance.cores_held_by
    return record.spec.reservation.describe() + (f" ({held_by})" if held_by else "")


def run(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Task id.")] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", "-a", help="reference, noop, claude-code, codex, ... or command:<program>.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Episode seed.")] = 0,
    budget_minutes: Annotated[float | None, typer.Option(
        help="Wall-clock budget (default: the task's).")] = None,
    out: Annotated[Path, typer.Option(help="Folder for episode folders.")] = Path("runs"),
    sandbox: Annotated[str, typer.Option(help="Sandbox backend: bwrap, docker, none.")] = "bwrap",
    model: Annotated[str | None, typer.Option(
        help="LLM for LLM agents (opencode: provider/name).")] = None,
    reasoning_effort: Annotated[str | None, typer.Option(
        help="For LLM agents, e.g. low, medium, high (passed to the CLI's own option).")] = None,
    gateway_config: Annotated[Path | None, typer.Option(
        help="LLM gateway TOML (upstreams, key variables, prices) for LLM agents; "
             "default $VTBENCH_GATEWAY_CONFIG.")] = None,
    resume: Annotated[Path | None, typer.Option(help="Finish an interrupted episode.")] = None,
    close: Annotated[str | None, typer.Option(
        help="With --resume: finish the episode without running its agent again, scoring what "
             "the grader's ledger holds (the submission, else the initial system); the text "
             "says why its runner failed after the agent started.")] = None,
    allow_weak_limits: Annotated[bool, typer.Option(
        help="Run untrusted code even where no cgroup (v2 or v1) limits memory and processes "
             "per sandbox, or holds its cores; the episode record says so.")] = False,
    shared: Annotated[bool, typer.Option(
        help="Share the episode's cores with other shared episodes instead of holding them "
             "alone; the record and the report say \"shared\" beside the result.")] = False,
    wait_for_cores: Annotated[float, typer.Option(
        help="Minutes to wait for free cores (and GPUs) where other episodes hold them; "
             "0 refuses at once, naming who holds them.")] = 0.0,
    attribute: Annotated[bool, typer.Option(
        help="Then attribute the episode's gain to data, trainer and harness (vtbench "
             "attribute, one seed): operator compute, never the agent's; with --resume of a "
             "finished episode, only what is not yet cached.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run one episode; the agent's submission is scored on the hidden test split."""
    from vtbench.episode.runner import RunOptions, run_episode
    from vtbench.sandbox import ALLOW_WEAK_LIMITS_ENV

    if allow_weak_limits:  # read by every sandbox start, the grader's process included
        os.environ[ALLOW_WEAK_LIMITS_ENV] = "1"

    if resume is None and (task is None or agent is None):
        raise VtbenchError("say which task and agent", hint="pass --task and --agent, or --resume")
    if close is not None and resume is None:
        raise VtbenchError("--close finishes an interrupted episode", hint="pass --resume DIR")
    options = RunOptions(task=task or "", agent=agent or "", seed=seed,
                         budget_minutes=budget_minutes, out=out, sandbox=sandbox, model=model,
                         reasoning_effort=reasoning_effort, gateway_config=gateway_config,
                         shared=shared, wait_for_cores_minutes=wait_for_cores)
    record, path = run_episode(options, events=lambda line: err_console.log(line),
                               resume=resume, close=close)
    if attribute:
        from vtbench.attribution import attribute as attribute_episode

        record.attribution = attribute_episode(path.parent, sandbox=sandbox,
                                               say=lambda line: err_console.log(line))
    result = summary(record, path)
    if as_json:
        print_json(result)
        return
    print_table(f"episode {record.episode_id}", ["field", "value"],
                [[key, value] for key, value in result.items()])
    console.print(f"record: {path}")
