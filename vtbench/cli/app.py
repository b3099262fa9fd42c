"""The root typer app and its sub-apps."""

import typer

from vtbench.cli import gateway, prepare, report, tasks

app = typer.Typer(
    help="VibeTraining-Bench: evaluate research agents that co-design data, trainer and harness.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(tasks.app, name="tasks")
app.command("prepare")(prepare.prepare)
app.command("eval")(prepare.eval_command)
app.command("pretrain")(prepare.pretrain)
app.add_typer(gateway.app, name="gateway")
app.command("report")(report.report)
