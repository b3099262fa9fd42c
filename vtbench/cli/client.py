"""The commands an agent uses inside its sandbox: status, validate, models, merge, submit."""

from typing import Annotated

import typer

from vtbench.cli.options import JsonFlag
from vtbench.cli.output import console, print_json, print_table
from vtbench.client import GraderClient, episode_gpus, seconds_left
from vtbench.printable import printable

HarnessOption = Annotated[str, typer.Option(
    help="Harness folder, relative to the workspace; where the task fixes its harness, the "
         "grader runs the task's own whatever this says.")]
# An agent edits ``harness/`` to have it validated and submitted, so that is the default.
WORKSPACE_HARNESS = "harness"


def client() -> "GraderClient":
    return GraderClient.from_environment()


def status(as_json: JsonFlag = False) -> None:
    """Remaining time, budget and validations of this episode."""
    status, left, gpus = client().status(), seconds_left(), episode_gpus()
    if as_json:
        print_json({**status.model_dump(mode="json"), "seconds_left": left, "gpus": gpus})
        return
    time_left = "" if left is None else f"{left / 60:.1f} minutes, "
    console.print(f"episode {status.episode} ({status.task}): {time_left}"
                  f"{status.validations_left} validations and "
                  f"{status.compute_seconds_left:.0f} grader seconds left; "
                  f"GPUs: {', '.join(gpus) or 'none'}; submitted: {status.submitted}")


def validate(
    model: Annotated[str, typer.Option(help="Candidate folder, e.g. models/mine.")],
    harness: HarnessOption = WORKSPACE_HARNESS,
    as_json: JsonFlag = False,
) -> None:
    """Score a candidate on the validation split (spends one validation)."""
    answer = client().validate(model, harness)
    if as_json:
        print_json(answer.model_dump(mode="json"))
        return
    if answer.error:
        console.print(f"validation {answer.id} failed: {printable(answer.error)}")
        return
    console.print(f"validation {answer.id}: {printable(model)} scored {answer.score} "
                  f"({answer.state}; --json shows every instance)")


def models(as_json: JsonFlag = False) -> None:
    """Candidates seen by the grader, with their lineage."""
    answer = client().models()
    if as_json:
        print_json([candidate.model_dump(mode="json") for candidate in answer])
        return
    print_table("candidates", ["name", "origin", "parents", "best validation"],
                [[m.name, m.origin, ", ".join(m.parents), m.best_score] for m in answer])


def merge(
    method: Annotated[str, typer.Option(
        help="linear, slerp, ties, dare_ties or task_arithmetic.")],
    models_: Annotated[list[str], typer.Option("--models", help="Candidates to merge.")],
    out: Annotated[str, typer.Option(help="New candidate folder, e.g. models/merged.")],
    weights: Annotated[list[float] | None, typer.Option(
        "--weight", help="One weight per model (default equal).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Merge candidates into a new one (recorded in its lineage)."""
    chosen = weights or [1.0 / len(models_)] * len(models_)
    answer = client().merge(method, models_, chosen, out)
    if as_json:
        print_json(answer.model_dump(mode="json"))
        return
    console.print(f"merged {printable(', '.join(models_))} into {printable(answer.model)} "
                  f"({answer.method})")


def submit(
    model: Annotated[str, typer.Option(help="Candidate folder, e.g. models/mine.")],
    harness: HarnessOption = WORKSPACE_HARNESS,
    as_json: JsonFlag = False,
) -> None:
    """Submit the final system (once); it is scored on the hidden test split later."""
    answer = client().submit(model, harness)
    if as_json:
        print_json(answer.model_dump(mode="json"))
        return
    console.print(f"submitted {printable(model)}; the test score is not shown during the "
                  "episode")
