"""``vtbench reproduce RUN_DIR`` and ``vtbench attribute RUN_DIR...``: operator work on
finished episodes (never on an agent's budget); results cached in the private store and
written into each record."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vtbench.cli.options import JsonFlag
from vtbench.cli.output import console, err_console, print_json
from vtbench.printable import printable

if TYPE_CHECKING:
    from vtbench.episode.retrained import Attribution

Sandbox = Annotated[str, typer.Option(help="Sandbox backend of the retrainings and "
                                           "evaluations: bwrap, docker, none.")]


def _say(line: str) -> None:
    err_console.print(printable(line), highlight=False, markup=False)


def reproduce(
    run_dir: Annotated[Path, typer.Argument(help="An episode folder (it holds episode.json).")],
    as_json: JsonFlag = False,
    sandbox: Sandbox = "bwrap",
) -> None:
    """Retrain the submission from its snapshots and score it on val against the agent's
    own validation: "reproducible", or "not reproducible" with the reasons."""
    from vtbench.attribution import reproduce as run

    result = run(run_dir, sandbox=sandbox, say=_say)
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    verdict = "reproducible" if result.reproducible else "not reproducible"
    console.print(printable(
        f"{run_dir}: {verdict}; retrained val {_num(result.reproduced_score)}, the agent's "
        f"validation {_num(result.validation_score)}, tolerance {_num(result.tolerance)} "
        f"({result.tolerance_from})"), highlight=False, markup=False)
    for reason in result.reasons:
        console.print(printable(f"  - {reason}"), highlight=False, markup=False)


def attribute(
    run_dirs: Annotated[list[Path], typer.Argument(help="Episode folders.")],
    seeds: Annotated[int, typer.Option(min=1, max=10, help="Seeds per subset system "
                                       "(intervals with more than one).")] = 1,
    as_json: JsonFlag = False,
    sandbox: Sandbox = "bwrap",
    workers: Annotated[int, typer.Option(min=1, help="Trainings and evaluations at once.")]
    = 2,
) -> None:
    """Split each episode's test gain into data, trainer and harness (Shapley values over
    the subsets of the changed components, and their interaction)."""
    from vtbench.attribution import attribute as run

    results = {str(d): run(d, seeds=seeds, sandbox=sandbox, say=_say, workers=workers)
               for d in run_dirs}
    if as_json:
        print_json({d: r.model_dump(mode="json") for d, r in results.items()})
        return
    for folder, result in results.items():
        if result.status != "attributed":
            console.print(printable(f"{folder}: {result.status}"), highlight=False,
                          markup=False)
            for reason in result.reasons:
                console.print(printable(f"  - {reason}"), highlight=False, markup=False)
            continue
        parts = ", ".join(f"{c} {getattr(result.shapley, c):+.4f}" for c in result.changed)
        console.print(printable(
            f"{folder}: test gain {_num(result.gain)} = {parts or 'nothing changed'}; "
            f"interaction {result.interaction:+.4f}"), highlight=False, markup=False)
        if result.episode_gain is not None:
            console.print(printable(_reconciled(result)), highlight=False, markup=False)


def _reconciled(result: "Attribution") -> str:
    """One line: the episode's own gain from the attributed gain and the two shifts."""
    back = None if result.retrain_shift is None else -result.retrain_shift
    return (f"  the episode's gain {_num(result.episode_gain)} = {_num(result.gain)} "
            f"{_signed(result.initial_shift)} (its initial system against the one rebuilt "
            f"at the agent's seeds) {_signed(back)} (its submission against the retrained)")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _signed(value: float | None) -> str:
    return "+ -" if value is None else f"{'+' if value >= 0 else '-'} {abs(value):.4f}"
