"""Synthetic but valid episodes, for demonstrating and benchmarking the report.

Each episode is a real :class:`EpisodeRecord` in ``<root>/<task>-<agent>-s<seed>/``
and, unless ``with_history`` is off, a real workspace git repository whose commits carry
real edits of ``data/``, ``trainer/`` and ``harness/`` (written in one ``git fast-import``
per episode, so a thousand episodes take seconds). Scores are made up, deterministically
from (agent, task, seed). Agent profiles: ``reference`` co-designs (D+T, then T algorithm
with H or D, then a merge, then decoding or hyperparameters), ``noop`` submits the initial
system without validating, any other name makes 2–8 validations of mostly light edits.
Nothing here is used when a real episode runs.
"""

import hashlib
import json
import os
import random
import subprocess
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from vtbench.episode.record import (
    BudgetSpent,
    EpisodeRecord,
    Lineage,
    LlmUsage,
    Submission,
    Validation,
)
from vtbench.layout import EpisodePaths

Files = dict[str, str]
BASE_TIME = 1_790_000_000

INITIAL_FILES: Files = {
    "TASK.md": "# Synthetic task\n",
    ".gitignore": "models/\n",
    "data/train.jsonl": "".join(json.dumps({"input": f"{a}+{a}", "target": str(2 * a)}) + "\n"
                                for a in range(40)),
    "trainer/config.toml": "lr = 0.001\nsteps = 200\nbatch_size = 16\n",
    "trainer/train.py": ("import torch\n\n\ndef loss_fn(logits, labels):\n"
                         "    return torch.nn.functional.cross_entropy(logits, labels)\n"),
    "harness/run.py": ('PROMPT = "Q: {q}\\nA:"\nTEMPERATURE = 0.0\n\n\n'
                       "def solve(client, q):\n"
                       "    return client.complete(PROMPT.format(q=q), temperature=TEMPERATURE)\n"),
}


def _filter(files: Files, k: int) -> None:
    lines = files["data/train.jsonl"].splitlines(keepends=True)
    files["data/train.jsonl"] = "".join(lines[: max(1, len(lines) - 3)])


def _augment(files: Files, k: int) -> None:
    files["data/train.jsonl"] += "".join(
        json.dumps({"input": f"{k}*{b}", "target": str(k * b)}) + "\n" for b in range(3))


def _relabel(files: Files, k: int) -> None:
    lines = files["data/train.jsonl"].splitlines()
    row = json.loads(lines[0])
    row["target"] = f"{row['target']} (checked {k})"
    files["data/train.jsonl"] = "\n".join([json.dumps(row), *lines[1:]]) + "\n"


def _mix(files: Files, k: int) -> None:
    files[f"data/extra_{k}.jsonl"] = json.dumps({"input": f"mix {k}", "target": "1"}) + "\n"


def _hyperparameters(files: Files, k: int) -> None:
    files["trainer/config.toml"] = f"lr = {0.001 * (k + 1):.4f}\nsteps = {200 + 50 * k}\n" \
                                   "batch_size = 16\n"


def _algorithm(files: Files, k: int) -> None:
    files["trainer/train.py"] += (f"\n\ndef regulariser_{k}(weights):\n"
                                  f"    return sum(w.pow(2).sum() for w in weights) * {k}\n")


def _prompt(files: Files, k: int) -> None:
    old = files["harness/run.py"].splitlines(keepends=True)
    files["harness/run.py"] = f'PROMPT = "Think step by step ({k}). Q: {{q}}\\nA:"\n' \
        + "".join(old[1:])


def _decoding(files: Files, k: int) -> None:
    lines = files["harness/run.py"].splitlines(keepends=True)
    files["harness/run.py"] = lines[0] + f"TEMPERATURE = 0.{k % 10}\n" + "".join(lines[2:])


def _control_flow(files: Files, k: int) -> None:
    files["harness/run.py"] += (f"\n\ndef retry_{k}(client, q):\n    for _ in range({k + 1}):\n"
                                "        answer = solve(client, q)\n        if answer:\n"
                                "            return answer\n    return ''\n")


EDITS: dict[str, Callable[[Files, int], None]] = {
    "filter": _filter, "augment": _augment, "relabel": _relabel, "mix": _mix,
    "hyperparameters": _hyperparameters, "algorithm": _algorithm, "prompt": _prompt,
    "decoding": _decoding, "control_flow": _control_flow,
}
LIGHT = ["filter", "hyperparameters", "hyperparameters", "filter", "augment", "decoding",
         "prompt", "relabel", "mix", "algorithm", "control_flow"]


def _plan(agent: str, harness: bool, rng: random.Random) -> list[list[str]]:
    """The edits made before each validation."""
    if agent == "noop":
        return []
    if agent == "reference":
        second = ["algorithm", "prompt"] if harness else ["algorithm", "augment"]
        return [["filter", "hyperparameters"], second, [],
                ["decoding"] if harness else ["hyperparameters"]]
    pool = LIGHT if harness else [e for e in LIGHT if e not in
                                  ("decoding", "prompt", "control_flow")]
    return [rng.sample(pool, k=1 if rng.random() < 0.7 else 2)
            for _ in range(rng.randint(2, 8))]


def make_episode(root: Path, agent: str, task: str, seed: int, *, harness: bool = True,
                 with_history: bool = True) -> Path:
    """Write one synthetic episode folder; returns it."""
    rng = random.Random(f"{agent}/{task}/{seed}")
    task_rng = random.Random(task)
    initial_val = round(task_rng.uniform(0.2, 0.4), 4)
    initial_test, reference = initial_val - 0.01, initial_val + 0.25
    folder = root / f"{task}-{agent}-s{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    plan = _plan(agent, harness, rng)
    trees, messages, files = [dict(INITIAL_FILES)], ["snapshot 0: workspace created"], \
        dict(INITIAL_FILES)
    for step, edits in enumerate(plan, start=1):
        for edit in edits:
            EDITS[edit](files, step)
        trees.append(dict(files))
        messages.append(f"validation {step}: models/cand{step}")
    skill = 0.03 if agent == "reference" else 0.01
    scores = [round(initial_val + skill * i + rng.gauss(0, 0.015), 4)
              for i in range(1, len(plan) + 1)]
    best = max(range(len(plan)), key=lambda i: scores[i]) if plan else None
    trees.append(dict(trees[best + 1] if best is not None else trees[0]))
    messages.append(f"submission: models/{'initial' if best is None else f'cand{best + 1}'}")
    commits = (_write_repo(folder / "workspace", trees, messages) if with_history
               else [_fake_id(folder.name, i) for i in range(len(trees))])
    record = _record(agent, task, seed, commits, scores, best,
                     (initial_val, initial_test, reference), rng)
    EpisodePaths(folder).record.write_text(record.model_dump_json(indent=1))
    return folder


def _record(agent: str, task: str, seed: int, commits: list[str], scores: list[float],
            best: int | None, systems: tuple[float, float, float],
            rng: random.Random) -> EpisodeRecord:
    initial_val, initial_test, reference = systems
    validations = [Validation(index=i + 1, elapsed_seconds=300.0 * (i + 1), snapshot=commits[i + 1],
                              candidate=f"cand{i + 1}", model_hash=_fake_id("m", i + 1),
                              harness_hash=_fake_id("h", i + 1), score=score,
                              compute_seconds=20.0)
                   for i, score in enumerate(scores)]
    candidates = [Lineage(name="initial", origin="initial")] + [
        Lineage(name=f"cand{i + 1}", origin="merged" if agent == "reference" and i == 2
                else "trained", snapshot=commits[i + 1]) for i in range(len(scores))]
    chosen = "initial" if best is None else f"cand{best + 1}"
    val = initial_val if best is None else scores[best]
    final = initial_test if best is None else round(val - abs(rng.gauss(0.01, 0.01)), 4)
    gain = round(final - initial_test, 6)
    elapsed = 300.0 * (len(scores) + 1)
    return EpisodeRecord(
        episode_id=f"{task}-{agent}-s{seed}", task=task, agent=agent, seed=seed,
        budget_minutes=60.0, started_at=datetime.fromtimestamp(BASE_TIME, UTC).isoformat(),
        ended_at=datetime.fromtimestamp(BASE_TIME + elapsed, UTC).isoformat(),
        status="finished", stop_reason="submitted", submitted=True, initial_val=initial_val,
        initial_test=initial_test, reference_test=reference, final_test=final, gain=gain,
        light_gain=round(0.3 * (reference - initial_test), 6),
        reference_gain=round(reference - initial_test, 6),
        normalized_gain=round(gain / (reference - initial_test), 6), validations=validations,
        submission=Submission(candidate=chosen, snapshot=commits[-1],
                              model_hash=_fake_id("m", 0 if best is None else best + 1),
                              harness_hash=_fake_id("h", 0 if best is None else best + 1),
                              elapsed_seconds=elapsed),
        candidates=candidates,
        spent=BudgetSpent(wall_seconds=elapsed + 30,
                          agent_seconds=elapsed - 140.0 * len(scores),
                          training_seconds=120.0 * len(scores),
                          grading_seconds=20.0 * len(scores), runner_seconds=30.0,
                          grader_compute_seconds=20.0 * len(scores),
                          validations=len(scores)),
        llm=LlmUsage(input_tokens=9000 * len(scores), cached_input_tokens=6000 * len(scores),
                     output_tokens=1500 * len(scores),
                     dollars=round(0.05 * len(scores), 4), requests=12 * len(scores)),
    )


def _fake_id(name: str, index: int) -> str:
    return hashlib.sha1(f"{name}/{index}".encode()).hexdigest()


def _write_repo(repo: Path, trees: list[Files], messages: list[str]) -> list[str]:
    """Commit each tree in order with one ``git fast-import``; returns the commit ids."""
    env = os.environ | {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    stream = bytearray()
    for mark, (tree, message) in enumerate(zip(trees, messages, strict=True), start=1):
        text = message.encode()
        stream += (f"commit refs/heads/main\nmark :{mark}\n"
                   f"committer runner <runner@localhost> {BASE_TIME + mark} +0000\n"
                   f"data {len(text)}\n").encode() + text + b"\n"
        if mark > 1:
            stream += f"from :{mark - 1}\n".encode()
        stream += b"deleteall\n"
        for path, content in sorted(tree.items()):
            body = content.encode()
            stream += f"M 100644 inline {path}\ndata {len(body)}\n".encode() + body + b"\n"
    marks = repo / ".git" / "synthetic-marks"
    subprocess.run(["git", "fast-import", "--quiet", f"--export-marks={marks}"],
                   cwd=repo, input=bytes(stream), check=True, env=env)
    ids = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    return [ids[f":{mark}"] for mark in range(1, len(trees) + 1)]


def make_episodes(root: Path, agents: Sequence[str], tasks: Sequence[str],
                  seeds: Sequence[int], *, harness_tasks: Sequence[str] | None = None,
                  with_history: bool = True) -> list[Path]:
    """Every agent × task × seed; ``harness_tasks`` expose the harness (default: the first)."""
    exposed = set(tasks[:1] if harness_tasks is None else harness_tasks)
    return [make_episode(root, agent, task, seed, harness=task in exposed,
                         with_history=with_history)
            for agent in agents for task in tasks for seed in seeds]
