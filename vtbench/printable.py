"""Showing agent-controlled text (candidate names, paths, messages, harness output) as data.

An agent chooses the names of its candidates and folders, and much of what the trusted side
prints or logs quotes them. Such text is never markup (the CLI's consoles print with markup
off), never a format string, and goes through :func:`printable` before it reaches a
terminal, a log or a report: every character Python's own ``repr`` would escape (control
characters such as ANSI escapes, newlines, carriage returns and bells; Unicode format
characters such as bidirectional overrides; line separators; the surrogates that stand for
bytes of a file name that are not UTF-8) is written as its escape (``\\x1b``, ``\\n``,
``\\u202e``, ``\\udcff``). The result acts on no terminal, cannot forge a line of a log,
and always encodes as UTF-8. :func:`unfailing` makes a logging callable unable to raise, so
that no printing failure stops trusted work; :class:`PrintableFormatter` keeps a log file's
messages one printable line each.
"""

import logging
import sys
from collections.abc import Callable
from contextlib import suppress

ELLIPSIS = "…"

Log = Callable[[str], None]


def printable(text: object, limit: int | None = None) -> str:
    """``text`` as one inert line; with ``limit``, at most that many characters (cut with
    an ellipsis)."""
    shown = str(text)
    if not shown.isprintable():
        shown = "".join(char if char.isprintable() else ascii(char)[1:-1] for char in shown)
    if limit is not None and len(shown) > limit:
        shown = shown[: max(limit - 1, 0)] + ELLIPSIS
    return shown


def unfailing(log: Log) -> Log:
    """``log`` that never raises: each line is made :func:`printable` first, and a line
    ``log`` fails on goes to standard error as ASCII instead (or nowhere)."""

    def guarded(line: str) -> None:
        shown = printable(line)
        try:
            log(shown)
        except Exception:  # a log line must never stop the work it reports
            with suppress(Exception):
                print(ascii(shown)[1:-1], file=sys.__stderr__, flush=True)

    return guarded


class PrintableFormatter(logging.Formatter):
    """Log lines whose message, arguments included, is :func:`printable`: a name with a
    newline forges no line of the log. A traceback keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)
