"""Options that several commands take, written once so that they read and behave alike."""

from pathlib import Path
from typing import Annotated

import typer

JsonFlag = Annotated[bool, typer.Option("--json", help="Print a machine-readable object.")]
"""``--json``: the command's result as one JSON value on stdout instead of tables."""

RowsJsonFlag = Annotated[bool, typer.Option(
    "--json", help="Print per agent × task rows as a JSON list.")]
"""``--json`` of the reports: their leaderboard rows."""

HtmlReport = Annotated[Path | None, typer.Option("--html", help="Write the HTML report here.")]
MarkdownReport = Annotated[Path | None, typer.Option(
    "--markdown", help="Write a Markdown report here.")]
