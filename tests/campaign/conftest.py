"""Campaign files for the tests, and the real ``vtbench`` command line run in-process."""

import sys
from pathlib import Path

import pytest

from vtbench.cli import main


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
