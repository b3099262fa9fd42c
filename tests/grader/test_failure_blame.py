"""A failure is the candidate's (charged) unless the grader shows it is its own (refunded,
with the evidence recorded): through the real grader over its socket, with real model
servers and sandboxes."""

import contextlib
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.grader.conftest import GraderProcess
from vtbench.grader import Ledger
from vtbench.prepare.prepare import system_folder
from vtbench.prepare.systems import model_dir
from vtbench.tasks import find_task


def edit_config(**changes: Any) -> Callable[[Path], None]:
    def plant(model: Path) -> None:
        config = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps({**config, **changes}))
    return plant


def space_bomb(model: Path) -> None:
    """A tokenizer whose normalizer turns every space into 4 M spaces: tokenizers aborts
    under the server's address-space limit (SIGABRT, not the loader's exit 3)."""
    tokenizer = json.loads((model / "tokenizer.json").read_text())
    tokenizer["normalizer"] = {"type": "Replace", "pattern": {"String": " "},
                               "content": " " * 4_000_000}
    (model / "tokenizer.json").write_text(json.dumps(tokenizer))


CANDIDATE_CRASHES = {
    "zero_heads": edit_config(num_attention_heads=0),  # ZeroDivisionError in transformers
    "bogus_dtype": edit_config(dtype="bogus"),  # AttributeError
    "huge_pad_id": edit_config(pad_token_id=1e30),  # a validation error of the config class
    "space_bomb": space_bomb,
}


def failure_causes(episode: str) -> list[dict[str, Any]]:
    return [e["detail"] for e in Ledger().events(episode) if e["kind"] == "failure_cause"]


@pytest.mark.parametrize("attack", [
    "zero_heads", *(pytest.param(name, marks=pytest.mark.slow)  # one real validation each
                    for name in CANDIDATE_CRASHES if name != "zero_heads")])
def test_a_candidate_that_crashes_the_loader_or_server_is_charged_with_the_control_recorded(
    grader: GraderProcess, small_task: Path, workspace: Path, attack: str
) -> None:
    CANDIDATE_CRASHES[attack](workspace / "models" / "good")
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=5))
    result = agent.post("/v1/validations", json={"model": "models/good"}).json()
    assert (result["state"], result["settlement"]) == ("failed_candidate", "charged"), result
    status = agent.get("/v1/status").json()
    assert status["validations_left"] == 4
    (cause,) = failure_causes(status["episode"])
    assert (cause["party"], cause["cause"]) == ("candidate", "control_passed")
    assert "initial system loaded and answered" in cause["evidence"]
    assert "/tmp/" not in result["error"]  # no grader path reaches the agent


@pytest.mark.slow
def test_a_failure_while_the_grader_itself_is_broken_is_refunded_with_the_control_recorded(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    CANDIDATE_CRASHES["zero_heads"](workspace / "models" / "good")
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=5))
    # The store's copy of the initial system breaks (a disk fault, say): the control fails.
    initial = model_dir(system_folder(find_task(str(small_task)), "initial"), 0)
    shutil.rmtree(initial)
    initial.mkdir()
    result = agent.post("/v1/validations", json={"model": "models/good"}).json()
    assert (result["state"], result["settlement"]) == ("failed_infra", "refunded"), result
    status = agent.get("/v1/status").json()
    assert status["validations_left"] == 5
    (cause,) = failure_causes(status["episode"])
    assert (cause["party"], cause["cause"]) == ("grader", "control_failed")
    assert "ZeroDivisionError" in cause["error"]


@pytest.mark.slow  # two episodes' validations, a control between them
def test_a_crash_is_charged_to_its_episode_while_another_episode_sharing_the_grader_scores(
    grader: GraderProcess, small_task: Path, workspace: Path, tmp_path: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    healthy = tmp_path / "healthy-workspace"
    shutil.copytree(workspace, healthy)
    CANDIDATE_CRASHES["zero_heads"](workspace / "models" / "good")
    grader.start()
    crashing = grader.client(grader.create_episode(small_task, workspace, validations=5))
    scoring = grader.client(grader.create_episode(small_task, healthy, validations=5))
    with ThreadPoolExecutor(2) as pool:
        crashed = pool.submit(crashing.post, "/v1/validations", json={"model": "models/good"})
        scored = pool.submit(scoring.post, "/v1/validations", json={"model": "models/good"})
        crash, score = crashed.result().json(), scored.result().json()
    assert (crash["state"], crash["settlement"]) == ("failed_candidate", "charged")
    assert (score["state"], score["settlement"]) == ("completed", "charged")
    assert crashing.get("/v1/status").json()["validations_left"] == 4
    assert scoring.get("/v1/status").json()["validations_left"] == 4
    other = scoring.get("/v1/status").json()["episode"]
    assert failure_causes(other) == []


def kill_sandboxes_of(ancestor: int) -> None:
    """SIGKILL every bwrap below process ``ancestor`` (as the host's OOM killer would)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]),
                                            (entry / "comm").read_text().strip())

    def below(pid: int) -> bool:
        while pid in parents and pid != ancestor:
            pid = parents[pid][0]
        return pid == ancestor

    doomed = [pid for pid, (_, name) in parents.items() if name == "bwrap" and below(pid)]
    assert doomed, "the grader started no harness sandbox ahead"
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_harness_sandbox_lost_mid_validation_is_refunded_with_its_cause(
    grader: GraderProcess, small_task: Path, workspace: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real infrastructure failure: the host's bwrap stops working after the grader
    started (say, a kernel update turned off unprivileged namespaces). The candidate is
    sound; its validation is refunded, and the ledger says why."""
    real = shutil.which("bwrap", path="/usr/local/bin:/usr/bin:/bin")
    assert real is not None
    host = Path(tempfile.mkdtemp(prefix="vtb-host-"))  # the wrapper runs as the sandbox uid
    host.chmod(0o755)
    broken = host / "namespaces-off"
    tools = tmp_path / "tools"
    (tools / "bin").mkdir(parents=True)
    wrapper = tools / "bin" / "bwrap"
    wrapper.write_text(f"#!/bin/sh\nif [ -e {broken} ]; then\n"
                       "  echo 'bwrap: No permissions to create a new namespace' >&2; exit 1\n"
                       f"fi\nexec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("VTBENCH_TOOLS_DIR", str(tools))
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=5))
    broken.touch()
    assert grader.process is not None
    kill_sandboxes_of(grader.process.pid)  # the harness sandbox it started ahead dies too
    result = agent.post("/v1/validations", json={"model": "models/good"}).json()
    assert (result["state"], result["settlement"]) == ("failed_infra", "refunded"), result
    status = agent.get("/v1/status").json()
    assert status["validations_left"] == 5
    (cause,) = failure_causes(status["episode"])
    assert cause["party"] == "grader"
    assert cause["cause"] in ("sandbox_unavailable", "control_failed"), cause
    broken.unlink()  # the host is mended: the same candidate scores, and is charged
    mended = agent.post("/v1/validations", json={"model": "models/good"}).json()
    assert (mended["state"], mended["settlement"]) == ("completed", "charged"), mended
    shutil.rmtree(host)
