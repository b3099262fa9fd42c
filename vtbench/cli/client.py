"""The commands an agent uses inside its sandbox: status, validate, models, merge, submit."""

from typing import Annotated

import typer

from vtbench.cli.output import console, print_json, print_table
from vtbench.client import GraderClient, seconds_left

JsonFlag = Annotated[bool, typer.Option("--json", help="Print a machine-readable object.")]
HarnessOption = Annotated[str, typer.Option(
    help="Harness folder, relative to the workspace; where the task fixes its harness, the "
         "grader runs the task's own whatever this says.")]
# An agent edits ``harness/`` to have it validated and submitted, so that is the default.
WORKSPACE_HARNESS = "harness"


def client() -> "GraderClient":

    return GraderClient.from_environment()


def status(as_json: JsonFlag = False) -> None:
    """Remaining time, budget and validations of this episode."""
    answer = {**client().status(), "seconds_left": seconds_left()}
    if as_json:
        print_json(answer)
        return
    time_left = ("" if answer["seconds_left"] is None
                 else f"{answer['seconds_left'] / 60:.1f} minutes, ")
    console.print(f"episode {answer['episode']} ({answer['task']}): {time_left}"
                  f"{answer['validations_left']} validations and "
                  f"{answer['compute_seconds_left']:.0f} grader seconds left; "
                  f"submitted: {answer['submitted']}")


def validate(
    model: Annotated[str, typer.Option(help="Candidate folder, e.g. models/mine.")],
    harness: HarnessOption = WORKSPACE_HARNESS,
    as_json: JsonFlag = False,
) -> None:
    """Score a candidate on the validation split (spends one validation)."""
    answer = client().validate(model, harness)
    if as_json:
        print_json(answer)
        return
    if answer.get("error"):
        console.print(f"validation {answer.get('id')} failed: {answer['error']}")
        return
    console.print(f"validation {answer.get('id')}: {model} scored {answer.get('score')} "
                  f"({answer.get('state')}; --json shows every instance)")


def models(as_json: JsonFlag = False) -> None:
    """Candidates seen by the grader, with their lineage."""
    answer = client().models()
    if as_json:
        print_json(answer)
        return
    print_table("candidates", ["name", "origin", "parents", "best validation"],
                [[m["name"], m["origin"], ", ".join(m.get("parents", [])),
                  m.get("best_score")] for m in answer])


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
        print_json(answer)
        return
    console.print(f"merged {', '.join(models_)} into {answer['model']} ({method})")


def submit(
    model: Annotated[str, typer.Option(help="Candidate folder, e.g. models/mine.")],
    harness: HarnessOption = WORKSPACE_HARNESS,
    as_json: JsonFlag = False,
) -> None:
    """Submit the final system (once); it is scored on the hidden test split later."""
    answer = client().submit(model, harness)
    if as_json:
        print_json(answer)
        return
    console.print(f"submitted {model}; the test score is not shown during the episode")
