"""Grader fixtures: a small prepared task, a workspace with a real tiny model, and the real
grader process on a unix socket."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.evaluation.conftest import tiny_model  # noqa: F401  (session-scoped real checkpoint)
from vtbench import layout
from vtbench.grader.tokens import operator_token
from vtbench.prepare.prepare import ScoreBook
from vtbench.tasks import find_task
from vtbench.tasks.store import ensure_splits

INITIAL_TEST, REFERENCE_TEST = 0.1, 0.6


@pytest.fixture
def small_task(tmp_path: Path) -> Path:
    """The built-in dsl task (editable harness) cut to 4 val and 4 test items, prepared."""
    root = tmp_path / "tasks"
    shutil.copytree(layout.BUILTIN_TASKS, root, ignore=shutil.ignore_patterns("__pycache__"))
    toml = root / "dsl" / "task.toml"
    text = toml.read_text().replace("val = 200", "val = 4").replace("test = 400", "test = 4")
    assert "val = 4" in text and "test = 4" in text
    toml.write_text(text)
    ensure_splits(find_task(str(root / "dsl")))
    mark_prepared(root / "dsl")
    return root / "dsl"


@pytest.fixture
def workspace(tmp_path: Path, tiny_model: Path) -> Path:  # noqa: F811
    root = tmp_path / "workspace"
    shutil.copytree(tiny_model, root / "models" / "good")
    return root


class GraderProcess:
    """The real grader (``python -m vtbench.grader.serve``) on a short unix socket path."""

    def __init__(self, folder: Path) -> None:
        self.socket = folder / "grader.sock"
        self.operator = operator_token()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, crash_at: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k != "VTBENCH_GRADER_CRASH_AT"}
        if crash_at:
            env["VTBENCH_GRADER_CRASH_AT"] = crash_at
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vtbench.grader.serve", "--socket", str(self.socket)],
            env=env, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the grader exited while starting"
            try:
                if self.client().get("/openapi.json").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise TimeoutError("the grader did not start")

    def client(self, token: str | None = None, timeout: float = 300) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)),
                            base_url="http://grader", headers=headers, timeout=timeout)

    def operator_client(self) -> httpx.Client:
        return self.client(self.operator)

    def create_episode(self, task: Path, workspace: Path, validations: int = 5) -> str:
        body = episode_body(task, workspace, validations=validations, compute_seconds=600)
        answer = self.operator_client().post("/v1/operator/episodes", json=body)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["token"])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def mark_prepared(task_dir: Path) -> tuple[str, str]:
    """What ``prepare`` leaves for a task, without its trainings: the pack's record and
    digest, an initial model (a random tiny checkpoint) and test scores of the initial and
    reference systems. Returns the task's id and digest, as the runner sends them."""
    from vtbench.models.tiny import new_tiny_model, save_checkpoint
    from vtbench.prepare.digest import forget_stale, recorded_digest
    from vtbench.prepare.prepare import system_folder
    from vtbench.prepare.systems import is_complete, model_dir

    task = find_task(str(task_dir))
    forget_stale(task)
    initial = model_dir(system_folder(task, "initial"), 0)
    if not is_complete(initial):
        save_checkpoint(new_tiny_model(seed=3), initial)
        initial.with_name(initial.name + ".complete").touch()
    book = ScoreBook(task)
    for system, score in (("initial", INITIAL_TEST), ("reference", REFERENCE_TEST)):
        if book.get(system, "test", 0) is None:
            book.put(system, "test", 0, score)
    digest = recorded_digest(task)
    assert digest is not None
    return task.id, digest


def episode_body(task_dir: Path, workspace: Path, **budgets: float) -> dict[str, object]:
    """The operator's request for an episode on a task marked prepared."""
    task, digest = mark_prepared(task_dir)
    return {"task": task, "digest": digest, "workspace": str(workspace),
            "budgets": budgets or None}


@pytest.fixture
def grader() -> Iterator[GraderProcess]:
    folder = Path(tempfile.mkdtemp(prefix="vtg-", dir="/tmp"))  # AF_UNIX paths are short
    process = GraderProcess(folder)
    try:
        yield process
    finally:
        process.stop()
        shutil.rmtree(folder, ignore_errors=True)
