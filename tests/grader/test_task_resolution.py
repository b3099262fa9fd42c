"""The grader resolves an episode's task once, when the episode is registered, and holds
it: validations, status, the submission and its scoring never resolve it again."""

import logging
import shutil
import time
from pathlib import Path

import pytest

from tests.grader.conftest import mark_prepared
from vtbench.grader.core import Grader
from vtbench.grader.ledger import Ledger


def resolutions(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().endswith(" resolved")]


def test_each_episode_resolves_its_task_once_whatever_it_asks(
        small_task: Path, workspace: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="vtbench.grader")
    task, digest = mark_prepared(small_task)
    grader = Grader(ledger=Ledger(tmp_path / "ledger.sqlite"))
    grader.start()
    try:
        second = tmp_path / "second-workspace"
        shutil.copytree(workspace, second)
        for folder in (workspace, second):
            grant = grader.create_episode(task, digest, folder)
            episode = grader.authenticate(grant.token)
            grader.status(episode)
            queued = grader.validate(episode, "models/good")
            deadline = time.monotonic() + 300
            while grader.validation(episode, queued.id).state in ("queued", "running"):
                assert time.monotonic() < deadline
                time.sleep(0.2)
            grader.submit(episode, "models/good")
            grader.finish_episode(episode.id)
    finally:
        grader.stop()
    assert len(resolutions(caplog)) == 2, resolutions(caplog)
