"""The root typer app and its sub-apps."""

from importlib.metadata import version
from typing import Annotated

import typer

from vtbench.cli import (
    attribution,
    campaign,
    client,
    gateway,
    grader,
    prepare,
    report,
    run,
    tasks,
)

app = typer.Typer(
    help="VibeTraining-Bench: evaluate research agents that co-design data, trainer and harness.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"vtbench {version('vtbench')}")
        raise typer.Exit()


@app.callback()
def root(
    show_version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the installed version and exit.")] = False,
) -> None:
    """VibeTraining-Bench: evaluate research agents that co-design data, trainer and harness."""


app.add_typer(tasks.app, name="tasks")
app.command("prepare")(prepare.prepare)
app.command("eval")(prepare.eval_command)
app.command("pretrain")(prepare.pretrain)
app.command("run")(run.run)
for command in (client.status, client.validate, client.models, client.merge, client.submit):
    app.command(rich_help_panel="Inside an episode")(command)
app.add_typer(gateway.app, name="gateway")
app.add_typer(grader.app, name="grader")
app.command("reproduce")(attribution.reproduce)
app.command("attribute")(attribution.attribute)
app.command("report")(report.report)
app.add_typer(campaign.app, name="campaign")
