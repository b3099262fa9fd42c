"""The root typer app and its sub-apps."""

import typer

from vtbench.cli import gateway, report, tasks

app = typer.Typer(
    help="VibeTraining-Bench: evaluate research agents that co-design data, trainer and harness.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(tasks.app, name="tasks")
app.add_typer(gateway.app, name="gateway")
app.command("report")(report.report)
