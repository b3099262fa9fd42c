"""The ``vtbench`` command line: one typer app, sub-apps per concept.

Expected errors (:class:`VtbenchError`) print one line with the fix and exit with the
error's code; importing this module imports no heavy library.
"""

import sys

import click

from vtbench.cli.app import app
from vtbench.errors import VtbenchError

__all__ = ["app", "main"]


def main() -> None:
    try:
        app(standalone_mode=False)
    except VtbenchError as err:
        print(f"error: {err.one_line()}", file=sys.stderr)
        sys.exit(err.exit_code)
    except SystemExit:
        raise
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except (KeyboardInterrupt, click.exceptions.Abort):
        print("interrupted", file=sys.stderr)
        sys.exit(130)
