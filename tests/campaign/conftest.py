"""Campaign files and episode folders for the tests, and the real ``vtbench`` command line
run in-process."""

import sys
from pathlib import Path
from typing import Literal

import pytest

from vtbench.cli import main
from vtbench.episode.record import EpisodeRecord


def write_campaign(folder: Path, text: str, name: str = "campaign.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        *args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``vtbench ARGS`` (the installed entry point's code)."""
    monkeypatch.setattr(sys, "argv", ["vtbench", *args])
    try:
        main()
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


STARTED = "2026-01-01T00:00:05+00:00"


def episode_folder(slot: Path, name: str, status: Literal["running", "finished", "failed"] | None,
                   submitted: bool = False, agent_started: bool = False,
                   stop_reason: str = "agent_exited") -> Path:
    """An episode folder in ``slot`` as a runner leaves it (no record: ``status`` None)."""
    folder = slot / name
    (folder / "workspace").mkdir(parents=True)
    if status is not None:
        record = EpisodeRecord(episode_id=name, task="arith", agent="noop", seed=0,
                               budget_minutes=3, started_at="2026-01-01T00:00:00+00:00",
                               agent_started_at=STARTED if agent_started else None,
                               status=status, submitted=submitted, gain=0.0 if status else None,
                               stop_reason=stop_reason)
        if stop_reason == "runner_failed":
            record.runner_failure = "the runner was killed by SIGKILL"
        (folder / "episode.json").write_text(record.model_dump_json())
    return folder
