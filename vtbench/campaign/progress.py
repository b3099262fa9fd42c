"""What a campaign shows while it runs: a live table on a terminal, plain lines always.

Every event (an episode started, ended, tried again; a task prepared) is one timestamped
line appended to ``campaign.log``, flushed at once, so the log survives a ``kill -9``.
When stdout is a terminal a rich table (episode, state, attempts, elapsed, gain) is
redrawn in place; otherwise the lines also go to stderr. ``vtbench campaign status``
draws the same table from the ledger. A line or a reason may quote what an agent chose (a
candidate's name in a runner's error): it is :func:`~vtbench.printable.printable`, and no
console here interprets markup.
"""

import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from vtbench.campaign.ledger import EpisodeState
from vtbench.printable import printable

MAX_ROWS = 40
"""Rows of the live table; running episodes come first, then the most recently ended."""


def elapsed(row: EpisodeState, now: float) -> float | None:
    if row.state == "running" and row.started_at is not None:
        return now - row.started_at
    return row.seconds


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}"


def tally(rows: list[EpisodeState]) -> dict[str, int]:
    """Episodes per state, in the order of a campaign's life (states without one left out)."""
    found: Counter[str] = Counter(row.state for row in rows)
    order = ("finished", "failed_agent", "failed_infra", "running", "pending")
    return {state: found[state] for state in order if found[state]}


def counts(rows: list[EpisodeState]) -> str:
    return ", ".join(f"{number} {state}" for state, number in tally(rows).items())


def status_table(title: str, rows: list[EpisodeState], limit: int | None = None) -> Table:
    """The rows in plan order; with a ``limit``, running ones first, then the most recently
    started, at most ``limit``."""
    now = time.time()
    shown = rows
    if limit is not None:
        shown = sorted(rows, key=lambda r: (r.state != "running", r.state == "pending",
                                            -(r.started_at or 0.0)))[:limit]
    table = Table(title=title, caption=counts(rows))
    for column in ("episode", "state", "attempts", "elapsed", "gain", "reason"):
        table.add_column(column, overflow="fold")
    for row in shown:
        table.add_row(printable(row.key), row.state, str(row.attempts), clock(elapsed(row, now)),
                      "-" if row.gain is None else f"{row.gain:+.4f}",
                      "" if row.state == "finished" else printable(row.reason or "", 80))
    return table


class CampaignProgress:
    """The campaign's log file, and the live table when stdout is a terminal."""

    def __init__(self, log: Path, title: str, live: bool | None = None) -> None:
        self.path, self.title = log, title
        self.live_wanted = sys.stdout.isatty() if live is None else live
        self.log: IO[str] | None = None
        self.live: Live | None = None

    def __enter__(self) -> "CampaignProgress":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.log = self.path.open("a", buffering=1)
        if self.live_wanted:
            self.live = Live(Table(title=self.title), console=Console(markup=False, emoji=False),
                             refresh_per_second=2, transient=True)
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()
        if self.log is not None:
            self.log.close()

    def line(self, text: str) -> None:
        stamp, text = datetime.now(UTC).isoformat(timespec="seconds"), printable(text)
        if self.log is not None:
            self.log.write(f"{stamp} {text}\n")
        if self.live is not None:
            self.live.console.log(text)
        else:
            print(f"{stamp} {text}", file=sys.stderr, flush=True)

    def show(self, rows: list[EpisodeState]) -> None:
        if self.live is not None:
            self.live.update(status_table(self.title, rows, MAX_ROWS))
