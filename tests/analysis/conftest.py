"""Real workspace git histories for the analysis tests: every snapshot is a real commit."""

import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

from vtbench.episode.record import (
    BudgetSpent,
    EpisodeRecord,
    Lineage,
    Submission,
    Validation,
)

GIT_ENV = {"GIT_AUTHOR_NAME": "runner", "GIT_AUTHOR_EMAIL": "runner@localhost",
           "GIT_COMMITTER_NAME": "runner", "GIT_COMMITTER_EMAIL": "runner@localhost"}

TRAIN_ROWS = [{"input": f"{a}+{a}", "target": str(2 * a)} for a in range(6)]
TRAINER_PY = '''"""Initial trainer."""
import torch

LEARNING_RATE = 0.001


def loss_fn(logits, labels):
    return torch.nn.functional.cross_entropy(logits, labels)


def train(model, batches, steps=100):
    opt = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    for _, (x, y) in zip(range(steps), batches):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
'''
CONFIG_TOML = 'lr = 0.001\nsteps = 200\n[optimizer]\nname = "adamw"\nweight_decay = 0.0\n'
HARNESS_PY = '''"""Initial harness."""
import json
import sys

PROMPT = "Question: {question}\\nAnswer:"
MAX_RETRIES = 1


def solve(client, question):
    reply = client.complete(PROMPT.format(question=question), temperature=0.0, max_tokens=16)
    return reply.strip()


def main():
    for line in sys.stdin:
        item = json.loads(line)
        print(json.dumps({"output": solve(None, item["question"])}))
'''


def jsonl(rows: Iterable[dict[str, object]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


class Workspace:
    """A workspace repository laid out as DESIGN.md says; ``snapshot`` commits one event."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.write("TASK.md", "# task\n")
        self.write(".gitignore", "models/\n")
        self.write("data/train.jsonl", jsonl(TRAIN_ROWS))
        self.write("data/prepare.py", 'print("prepare")\n')
        self.write("trainer/config.toml", CONFIG_TOML)
        self.write("trainer/train.py", TRAINER_PY)
        self.write("harness/run.py", HARNESS_PY)
        self.write("models/initial/config.json", "{}")
        self.git("init", "-q", "-b", "main")
        self.first = self.snapshot("snapshot 0: workspace created")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True,
                              text=True, env=os.environ | GIT_ENV).stdout.strip()

    def write(self, path: str, text: str) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def read(self, path: str) -> str:
        return (self.root / path).read_text()

    def replace(self, path: str, old: str, new: str) -> None:
        text = self.read(path)
        assert old in text, f"{old!r} not in {path}"
        self.write(path, text.replace(old, new))

    def remove(self, path: str) -> None:
        (self.root / path).unlink()

    def snapshot(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "episode" / "workspace")


def write_record(folder: Path, steps: list[tuple[str, float | None]], *,
                 submitted: int | None = None, submission_snapshot: str | None = None,
                 **fields: object) -> EpisodeRecord:
    """A real episode.json in ``folder``: one validation per (snapshot, score) in ``steps``;
    ``submitted`` is the 1-based validation whose pair was submitted."""
    validations = [Validation(index=i, elapsed_seconds=60.0 * i, snapshot=snap,
                              candidate=f"cand{i}", model_hash=f"m{i}", harness_hash=f"h{i}",
                              score=score, compute_seconds=10.0)
                   for i, (snap, score) in enumerate(steps, start=1)]
    submission = None
    if submitted is not None:
        chosen = validations[submitted - 1]
        submission = Submission(candidate=chosen.candidate,
                                snapshot=submission_snapshot or chosen.snapshot,
                                model_hash=chosen.model_hash, harness_hash=chosen.harness_hash,
                                elapsed_seconds=60.0 * (len(steps) + 1))
    values: dict[str, object] = {
        "episode_id": folder.name, "task": "arith", "agent": "scripted", "seed": 0,
        "budget_minutes": 30.0, "started_at": "2026-11-30T12:00:00+00:00",
        "status": "finished", "submitted": submission is not None, "initial_val": 0.30,
        "initial_test": 0.28, "reference_test": 0.60, "validations": validations,
        "submission": submission,
        "candidates": [Lineage(name=f"cand{i}", origin="merged" if i == 3 else "trained")
                       for i in range(1, len(steps) + 1)],
        "spent": BudgetSpent(wall_seconds=900, agent_seconds=300, training_seconds=500,
                             grading_seconds=60, runner_seconds=40, grader_compute_seconds=30,
                             validations=len(steps)),
    }
    values |= fields
    record = EpisodeRecord.model_validate(values)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "episode.json").write_text(record.model_dump_json(indent=1))
    return record
