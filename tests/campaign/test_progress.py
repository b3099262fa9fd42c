"""What a campaign shows while it runs, when a runner's error quotes a name an agent chose:
the live table and the log take it as text, one line per event."""

from pathlib import Path

from vtbench.campaign.ledger import EpisodeState
from vtbench.campaign.progress import CampaignProgress, status_table
from vtbench.cli.output import console

REASON = ("rich.errors.MarkupError: closing tag '[/]' at position 24 has nothing to close: "
          "models/rt/[/] [bold]\x1b[31m %s {}\nforged line")


def failed_row() -> EpisodeState:
    return EpisodeState(key="arith/noop/s0", state="failed_infra", attempts=2, reason=REASON,
                        folder=None, gain=None, node="local", started_at=None, seconds=3.0)


def test_a_hostile_reason_is_logged_and_drawn_as_text(tmp_path: Path) -> None:
    log = tmp_path / "campaign.log"
    with CampaignProgress(log, "campaign [/]", live=True) as progress:
        progress.line(f"arith/noop/s0: the infrastructure failed: {REASON}; tried again")
        progress.show([failed_row()])
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and "\x1b" not in lines[0]
    assert lines[0].endswith(r"models/rt/[/] [bold]\x1b[31m %s {}\nforged line; tried again")


def test_the_status_table_shows_a_hostile_reason_as_text() -> None:
    with console.capture() as captured:
        console.print(status_table("campaign c", [failed_row()]))
    shown = captured.get()
    assert "[/]" in shown and "\x1b[31m" not in shown and "forged line" not in shown
