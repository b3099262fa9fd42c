"""The ``vtbench`` command line: one typer app, sub-apps per concept.

Expected errors (:class:`VtbenchError`) print one line with the fix and exit with the
error's code; the line is :func:`~vtbench.printable.printable`, since it may quote a path an
agent chose. Usage errors (unknown command or option, missing argument, bad value) are
typer's own: its usage line and the error, exit code 2, never a traceback; an interrupt
exits 130. Typer handles those in its standalone mode, so this module needs no click
exception class (typer bundles its own click, whose classes are not those of an installed
``click``). Importing this module imports no heavy library.
"""

import sys

from vtbench.cli.app import app
from vtbench.errors import VtbenchError
from vtbench.printable import printable

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except VtbenchError as err:
        print(f"error: {printable(err.one_line())}", file=sys.stderr)
        sys.exit(err.exit_code)
