"""``vtbench campaign report``: every planned episode is in it. An episode closed after its
runner failed is counted with its reason; one without a result is listed, with why, and
not counted."""

from pathlib import Path

import pytest

from tests.campaign.conftest import cli, write_campaign
from vtbench.analysis.synthetic import make_episode
from vtbench.campaign import CampaignFolder, Ledger, Result, load_plan
from vtbench.episode.record import EpisodeRecord
from vtbench.layout import EpisodePaths

NOT_PREPARED = "task 'mini' is not prepared [/] (run: vtbench prepare --task mini)"


def campaign(tmp_path: Path, task: Path, seeds: int = 2,
             out: str = "out") -> tuple[CampaignFolder, Ledger, list[str]]:
    plan = load_plan(write_campaign(tmp_path, 'agents = [{name = "noop"}]\n'
                                    f'tasks = ["{task}"]\nseeds = {list(range(seeds))}\n'
                                    'retries = 1\n'))
    folder = CampaignFolder(tmp_path / out)
    folder.root.mkdir()
    folder.write_plan(plan)
    ledger = Ledger(folder.ledger)
    ledger.add([e.key for e in plan.episodes])
    return folder, ledger, [e.key for e in plan.episodes]


def out_of_attempts(ledger: Ledger, key: str) -> None:
    for _ in range(2):
        ledger.claim(key)
        ledger.fail(key, NOT_PREPARED, max_attempts=2)


def closed_episode(folder: CampaignFolder, key: str) -> str:
    """A synthetic episode as a closing attempt leaves it; its folder, relative."""
    episode = EpisodePaths(make_episode(folder.slot(key), "noop", "mini", 0))
    record = EpisodeRecord.model_validate_json(episode.record.read_text())
    record = record.model_copy(update={
        "stop_reason": "runner_failed", "runner_failure": "the runner was killed by SIGKILL",
        "agent_started_at": record.started_at})
    episode.record.write_text(record.model_dump_json())
    return str(episode.folder.relative_to(folder.root))


def finished(folder: CampaignFolder, ledger: Ledger, key: str) -> None:
    ledger.claim(key)
    ledger.finish(key, Result(state="finished", reason="closed", seconds=1.0, node="here",
                              folder=closed_episode(folder, key), gain=0.0))


def test_the_report_counts_a_closed_episode_and_lists_one_without_a_result(
        tmp_path: Path, minimal_task: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    folder, ledger, (closed, missing) = campaign(tmp_path, minimal_task)
    finished(folder, ledger, closed)
    out_of_attempts(ledger, missing)
    markdown = tmp_path / "report.md"

    code, _, err = cli(monkeypatch, capsys, "campaign", "report", str(folder.root),
                       "--markdown", str(markdown))
    assert code == 0, err
    assert f"no result: {missing} (failed_infra after 2 attempt(s)): {NOT_PREPARED}" in err
    text = markdown.read_text()
    assert text.startswith("# VibeTraining-Bench report\n\n1 episodes, 1 agents")
    assert "| runner\\_failed: the runner was killed by SIGKILL |" in text
    without = text.split("## Episodes without a result (not counted)")[1]
    shown = NOT_PREPARED.replace("[", "\\[").replace("]", "\\]")  # Markdown-escaped
    assert f"| {missing} | failed\\_infra | 2 | no | {shown} |" in without


def test_two_campaigns_report_together_and_an_episode_done_in_either_is_not_missing(
        tmp_path: Path, minimal_task: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    first, first_ledger, (seed0, seed1) = campaign(tmp_path, minimal_task, out="first")
    second, second_ledger, _ = campaign(tmp_path, minimal_task, out="second")
    finished(first, first_ledger, seed0)
    out_of_attempts(first_ledger, seed1)
    finished(second, second_ledger, seed1)
    markdown = tmp_path / "report.md"

    code, _, err = cli(monkeypatch, capsys, "campaign", "report", str(first.root),
                       str(second.root), "--markdown", str(markdown))
    assert code == 0, err
    assert "no result" not in err and "not run yet" not in err
    assert markdown.read_text().startswith("# VibeTraining-Bench report\n\n2 episodes")


def test_an_episode_with_a_result_in_two_campaigns_is_refused(
        tmp_path: Path, minimal_task: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    first, first_ledger, (seed0, _) = campaign(tmp_path, minimal_task, out="first")
    second, second_ledger, _ = campaign(tmp_path, minimal_task, out="second")
    finished(first, first_ledger, seed0)
    finished(second, second_ledger, seed0)

    code, _, err = cli(monkeypatch, capsys, "campaign", "report", str(first.root),
                       str(second.root))
    assert code == 1
    assert (f"error: episode {seed0} has a result in {first.root} and in {second.root}: it "
            "would be counted twice") in err


def test_a_campaign_without_any_result_lists_every_episode_and_says_so(
        tmp_path: Path, minimal_task: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    folder, ledger, (failed, waiting) = campaign(tmp_path, minimal_task)
    out_of_attempts(ledger, failed)
    code, _, err = cli(monkeypatch, capsys, "campaign", "report", str(folder.root))
    assert code == 1
    assert err.splitlines() == [
        f"no result: {failed} (failed_infra after 2 attempt(s)): {NOT_PREPARED}",
        f"not run yet: 1 planned episode(s): {waiting}",
        f"error: {folder.root}: no episode has a result yet (see vtbench campaign status "
        f"{folder.root})"]


def test_episodes_not_yet_run_are_one_line_that_names_the_first_five(
        tmp_path: Path, minimal_task: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    folder, ledger, keys = campaign(tmp_path, minimal_task, seeds=8)
    finished(folder, ledger, keys[0])
    ledger.claim(keys[1])
    code, _, err = cli(monkeypatch, capsys, "campaign", "report", str(folder.root))
    assert code == 0, err
    assert err.splitlines()[-2:] == [
        f"no result: {keys[1]} (running after 1 attempt(s)): running (or its campaign "
        "stopped)",
        f"not run yet: 6 planned episode(s): {', '.join(keys[2:7])} and 1 more"]
