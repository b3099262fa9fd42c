"""A campaign of real episodes on the local executor, its process killed with SIGKILL while
an episode runs, then run again: every episode ends exactly once, in the ledger and on disk;
the interrupted one is resumed in its own folder; none done before the kill runs again."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.campaign.episodes.conftest import campaign_file, rows, vtbench
from vtbench.campaign import CampaignFolder
from vtbench.campaign.attempt import episode_folders, record_of

pytestmark = pytest.mark.slow


def wait_for_one_done_and_one_running(out: Path, timeout: float = 600) -> None:
    """Until the ledger holds an ended episode and a running one whose record exists, started
    moments ago (so it is still running when the campaign is killed)."""
    folder, deadline = CampaignFolder(out), time.monotonic() + timeout
    while time.monotonic() < deadline:
        if folder.ledger.exists():
            try:
                found = rows(out)
            except sqlite3.OperationalError:  # the campaign is creating the tables
                found = {}
            done = [r for r in found.values() if r.state in ("finished", "failed_agent")]
            running = [r for r in found.values() if r.state == "running"
                       and time.time() - (r.started_at or 0.0) < 8.0
                       and any(record_of(f) for f in episode_folders(folder.slot(r.key)))]
            if done and running:
                return
        time.sleep(0.5)
    raise AssertionError(f"no moment with one episode done and one running: {out}")


def runners_of(out: Path) -> list[int]:
    """Live processes whose command line names the campaign folder."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if proc.name.isdigit() and str(out).encode() in command and state != "Z":
            found.append(int(proc.name))
    return found


def test_a_killed_campaign_resumes_and_ends_every_episode_exactly_once(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    file, out = campaign_file(tmp_path, prepared_arith), tmp_path / "out"
    with (tmp_path / "first.log").open("w") as log:
        first = subprocess.Popen([sys.executable, "-m", "vtbench", "campaign", "run", str(file),
                                  "--out", str(out)], stdout=log, stderr=log)
    wait_for_one_done_and_one_running(out)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    before = rows(out)
    done_before = {key: (row.folder, (out / row.folder / "episode.json").stat().st_mtime_ns)
                   for key, row in before.items() if row.folder}
    recorded_then = {key: {f.name: record_of(f) is not None
                           for f in episode_folders(CampaignFolder(out).slot(key))}
                     for key, row in before.items() if row.state == "running"}
    interrupted = {key: [name for name, recorded in found.items() if recorded]
                   for key, found in recorded_then.items()}
    unrecorded = not all(all(found.values()) for found in recorded_then.values())
    assert any(interrupted.values()), "no episode with a record was running at the kill"
    deadline = time.monotonic() + 10
    while runners_of(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert runners_of(out) == [], "an episode's runner outlived the killed campaign"

    second = vtbench("campaign", "run", str(file), "--out", str(out))
    assert second.returncode == 0, second.stderr[-2000:]
    after = rows(out)
    assert {key: row.state for key, row in after.items()} == {
        "arith-noop-s0": "finished", "arith-quitter-s0": "failed_agent",
        "arith-noop-s1": "finished", "arith-quitter-s1": "failed_agent"}
    for key, row in after.items():
        folders = episode_folders(CampaignFolder(out).slot(key))
        assert len(folders) == 1 and row.folder == f"episodes/{key}/{folders[0].name}"
        record = record_of(folders[0])
        assert record is not None and record.status == "finished" and record.gain == 0.0
        if key in done_before:
            assert row.attempts == 1
            assert (out / row.folder / "episode.json").stat().st_mtime_ns == done_before[key][1]
        if key in interrupted:  # resumed in its folder, or started afresh if it had none
            assert row.attempts == 2
            assert [f.name for f in folders] == (interrupted[key] or [folders[0].name])
    # a folder killed before its record was written is set aside, never resumed
    assert CampaignFolder(out).set_aside("x").parent.exists() == unrecorded
    assert after["arith-quitter-s0"].reason == "no submission: agent_exited"

    status = vtbench("campaign", "status", str(out), "--json")
    assert '"finished": 2' in status.stdout and '"failed_agent": 2' in status.stdout
    report = vtbench("campaign", "report", str(out), "--html", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "report.html").read_text()
    assert "noop" in html and "command:true" in html
