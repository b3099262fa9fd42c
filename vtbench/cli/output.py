"""Printing for the CLI: ``--json`` objects on stdout, rich tables and lines otherwise.

The consoles interpret no markup and no emoji codes: much of what they print quotes text an
agent chose (candidate names, paths, the grader's messages about them), which is shown as
it is, through :func:`vtbench.printable.printable` (table cells always are).
"""

import json
import os
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from vtbench.printable import printable

PIPED_WIDTH = 160
"""Columns of output going to a file or a pipe (rich's 80 would cut the wider tables)."""


def _console(stderr: bool = False) -> Console:
    """Progress lines (``log``) carry their time but not the source line that printed them."""
    made = Console(stderr=stderr, log_path=False, markup=False, emoji=False)
    if made.is_terminal or "COLUMNS" in os.environ:
        return made
    return Console(stderr=stderr, log_path=False, markup=False, emoji=False, width=PIPED_WIDTH)


console = _console()
err_console = _console(stderr=True)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=printable(title))
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(cell_text(cell) for cell in row))
    console.print(table)


def cell_text(cell: Any) -> str:
    """A table cell: ``-`` for None, floats to 4 decimals (0.8925, not 0.8925000000000001),
    anything else :func:`~vtbench.printable.printable`."""
    if cell is None:
        return "-"
    if isinstance(cell, float):
        return str(round(cell, 4))
    return printable(cell)
