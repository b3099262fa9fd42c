"""The episode runner (trusted): workspace, grader episode, sandboxed agent, finalisation.

Trusts: the grader (scores, ledger, lineage), the sandbox, the prepared task in the private
store. Does not trust: the agent and everything it writes (the workspace is only read
through the grader's intake, and the snapshot history lives outside the workspace).

The wall clock does not pause while the grader evaluates: validations cost the agent time
as well as credits. The agent is stopped (SIGTERM, then SIGKILL of its whole process tree)
at the deadline, which it finds in ``$VTBENCH_DEADLINE``, or as soon as its submission is
recorded. With no submission the final system is the initial one (gain 0). The record is
written at the start and after every step, so ``vtbench run --resume DIR`` can finish an
episode whose runner died. The agent's output is a pipe the runner copies to ``agent.log``
and its sockets are relays in a neutral folder (:mod:`vtbench.episode.plumbing`), so no
descriptor or socket of the sandbox names the episode folder or the private store. LLM
agents get their own metered gateway for the episode
(:mod:`vtbench.episode.gateway_process`); the record's ``llm`` is what it metered. The
workspace is a filesystem of its own of the task's ``disk_gb`` while the episode runs
(:mod:`vtbench.episode.disk`).
"""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vtbench.agents import AgentContext, get_agent
from vtbench.agents.llm import runtime_mounts
from vtbench.client import DEADLINE_ENV, GraderClient
from vtbench.episode.disk import WorkspaceDisk, unavailable
from vtbench.episode.gateway_process import config_path, episode_gateway, llm_usage
from vtbench.episode.grader_process import grader_log, running_grader
from vtbench.episode.leak_audit import audit
from vtbench.episode.plumbing import output_pipe, relayed_sockets
from vtbench.episode.provenance import provenance
from vtbench.episode.record import EpisodeRecord, Lineage, Submission, Validation
from vtbench.episode.sandbox import GATEWAY_PORT, research_spec
from vtbench.episode.timesplit import TimeSplit, close
from vtbench.errors import NotPrepared, VtbenchError
from vtbench.grader.tokens import operator_token
from vtbench.layout import EpisodePaths
from vtbench.models.base import resolve_base
from vtbench.prepare import score_summary
from vtbench.prepare.digest import is_current
from vtbench.prepare.prepare import system_folder
from vtbench.prepare.systems import is_complete, model_dir
from vtbench.sandbox import SandboxProcess, get_sandbox, prepare_writable
from vtbench.tasks import find_task
from vtbench.tasks.registry import Task
from vtbench.tasks.store import atomic_write
from vtbench.workspace import create_workspace

PROMPT = ("You are a research agent. Read /workspace/TASK.md. Improve the system by changing "
          "its training data, trainer and (where allowed) harness; train candidates, validate "
          "them with `vtbench validate`, and submit your best with `vtbench submit` before "
          "the budget runs out (`vtbench status` shows the time left).")
Events = Callable[[str], None]


@dataclass(frozen=True)
class RunOptions:
    task: str
    agent: str
    seed: int = 0
    budget_minutes: float | None = None
    out: Path = Path("runs")
    sandbox: str = "bwrap"
    model: str | None = None
    reasoning_effort: str | None = None
    gateway_config: Path | None = None
    """The operator's LLM gateway file (LLM agents); default ``$VTBENCH_GATEWAY_CONFIG``."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def initial_model(task: Task) -> Path:
    model = model_dir(system_folder(task, "initial"), 0)
    scores = score_summary(task)
    if not is_complete(model) or scores["initial"]["test"] is None:
        raise NotPrepared(f"task {task.id!r} is not prepared",
                          hint=f"run: vtbench prepare --task {task.id}")
    if not is_current(task):
        raise NotPrepared(f"task {task.id!r} changed since it was prepared",
                          hint=f"run: vtbench prepare --task {task.id}")
    return model


class Episode(EpisodePaths):
    """One episode folder: record, workspace, snapshots, the runner's private state."""

    def save(self, record: EpisodeRecord) -> None:
        atomic_write(self.record, record.model_dump_json(indent=2), mode=0o644)

    def load(self) -> EpisodeRecord:
        return EpisodeRecord.model_validate_json(self.record.read_text())

    def save_state(self, state: dict[str, Any]) -> None:
        atomic_write(self.runner_state, json.dumps(state))

    def state(self) -> dict[str, Any]:
        return json.loads(self.runner_state.read_text())


def start_episode(options: RunOptions, events: Events) -> tuple[Episode, EpisodeRecord]:
    task = find_task(options.task)
    agent = get_agent(options.agent)
    if agent.needs_gateway:
        config_path(options.gateway_config, agent.name)
    model = initial_model(task)
    scores = score_summary(task)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    slug = options.agent.replace("command:", "command-").replace("/", "_").replace(" ", "_")[:40]
    episode = Episode(options.out.resolve() / f"{task.id}-{slug}-s{options.seed}-{stamp}")
    episode.folder.mkdir(parents=True)
    limit_disk(episode, task, events)
    create_workspace(task, episode.workspace, episode.snapshots,
                     resolve_base(task.spec.base_model), model)
    budget = options.budget_minutes or task.spec.budgets.wall_clock_minutes
    record = EpisodeRecord(
        episode_id=episode.folder.name, task=task.id, agent=options.agent, seed=options.seed,
        budget_minutes=budget, started_at=now(), initial_val=scores["initial"]["val"],
        initial_test=scores["initial"]["test"], reference_test=scores["reference"]["test"],
        model=options.model if agent.needs_gateway else None,
        reasoning_effort=options.reasoning_effort if agent.needs_gateway else None,
        provenance=provenance(task, options.sandbox))
    episode.save(record)
    events(f"workspace ready: {episode.workspace}")
    return episode, record


def limit_disk(episode: Episode, task: Task, events: Events) -> None:
    resources = task.spec.resources
    reason = unavailable()
    if reason is None:
        WorkspaceDisk(episode.workspace).create(resources.disk_gb)
        events(f"workspace disk: {resources.disk_gb:g} GB")
    else:
        events(f"warning: the workspace has no disk limit ({reason}); only files over "
               f"{resources.max_file_gb:g} GB are cut off")


def run_agent(episode: Episode, record: EpisodeRecord, client: GraderClient, grader: Path,
              gateway: Path | None, options: RunOptions, events: Events) -> str:
    """Run the agent in its sandbox until it exits, submits or reaches the deadline."""
    state = episode.state()
    task, agent = find_task(state["task_path"]), get_agent(record.agent)
    elapsed = time.time() - datetime.fromisoformat(record.started_at).timestamp()
    remaining = record.budget_minutes * 60 - elapsed
    if remaining <= 0:
        return "deadline"
    context = AgentContext(task=task.id, seed=record.seed, budget_minutes=record.budget_minutes,
                           prompt=PROMPT, model=options.model,
                           reasoning_effort=options.reasoning_effort,
                           gateway_url=f"http://127.0.0.1:{GATEWAY_PORT}" if gateway else None)
    prepare_writable(episode.workspace)
    sockets = {"grader": grader, **({"gateway": gateway} if gateway else {})}
    with relayed_sockets(sockets) as relayed, output_pipe(episode.agent_log) as output:
        spec = research_spec(task, agent, episode.workspace, relayed["grader"], state["token"],
                             remaining, gateway_socket=relayed.get("gateway"),
                             extra_env=agent.environment(context))
        spec = spec.model_copy(update={"mounts": [*spec.mounts, *runtime_mounts(agent)]})
        events("leak audit of everything the agent will see")
        audit(task, [mount.source for mount in spec.mounts])
        deadline = {DEADLINE_ENV: str(int(time.time() + remaining))}
        spec = spec.model_copy(update={"env": {**spec.env, **deadline}})
        process = get_sandbox(options.sandbox).start(agent.command(context), spec,
                                                     stdout=output, stderr=output)
        events(f"agent {agent.name} started ({remaining / 60:.1f} min left)")
        return watch(process, client, state["episode"], record, events)


def watch(process: SandboxProcess, client: GraderClient, episode_id: str,
          record: EpisodeRecord, events: Events) -> str:
    """Follow the agent until it exits, submits (then stop it) or reaches the deadline."""
    seen, split = 0, TimeSplit(process.pid, record.spent)
    while process.poll() is None:
        time.sleep(1.0)
        status = client.request("GET", f"/v1/operator/episodes/{episode_id}/history")
        settled = [v for v in status["validations"]
                   if v["score"] is not None or v["error"] is not None]
        for validation in settled[seen:]:
            outcome = validation["score"] if validation["error"] is None else "failed"
            events(f"validation {validation['index']}: {validation['candidate']} "
                   f"-> {outcome}")
        seen = len(settled)
        split.tick(grading=len(settled) < len(status["validations"]))
        if status["submission"] is not None:
            events("submission recorded; stopping the agent")
            process.kill_tree()
            return "submitted"
    if process.killed_by_limit == "wall_seconds":
        return "deadline"
    return "agent_exited"


def finalize(episode: Episode, record: EpisodeRecord, client: GraderClient,
             stop_reason: str) -> EpisodeRecord:
    """Score the submission on test (grader side) and complete the record."""
    state = episode.state()
    scoring = time.monotonic()
    result = client.finish(state["episode"])
    record.spent.grading_seconds += time.monotonic() - scoring
    history = client.history(state["episode"])
    started = datetime.fromisoformat(record.started_at).timestamp()
    record.validations = [Validation.model_validate(v) for v in history["validations"]]
    record.submission = (Submission.model_validate(history["submission"])
                         if history["submission"] else None)
    record.candidates = [Lineage.model_validate(c) for c in history["candidates"]]
    record.submitted = record.submission is not None
    record.final_test = result["test_score"] if record.submitted else record.initial_test
    record.gain = result["gain"] if record.submitted else 0.0
    record.normalized_gain = result["normalised_gain"] if record.submitted else 0.0
    close(record.spent, time.time() - started)
    record.spent.validations = record.validations_used
    record.spent.grader_compute_seconds = round(
        sum(v.compute_seconds for v in record.validations), 1)
    record.llm = llm_usage(episode.folder, record.episode_id)
    record.status, record.stop_reason, record.ended_at = "finished", stop_reason, now()
    episode.save(record)
    return record


def run_episode(options: RunOptions, events: Events = lambda line: None,
                resume: Path | None = None) -> tuple[EpisodeRecord, Path]:
    """Run (or resume) one episode; returns the finished record and its path."""
    if resume is not None:
        episode = Episode(resume.resolve())
        record = episode.load()
        if record.status == "finished":
            WorkspaceDisk(episode.workspace).settle()
            return record, episode.record
    else:
        episode, record = start_episode(options, events)
    disk = WorkspaceDisk(episode.workspace)
    try:
        disk.attach()
        record = run_started(episode, record, options, events)
        disk.settle()
    finally:
        disk.detach()
    return record, episode.record


def run_started(episode: Episode, record: EpisodeRecord, options: RunOptions,
                events: Events) -> EpisodeRecord:
    """From the grader's episode to the finished record."""
    with running_grader(options.sandbox) as grader:
        events(f"grader log: {grader_log()}")
        client = GraderClient(grader, operator_token())
        if not episode.runner_state.exists():
            task_path = str(find_task(options.task).root)
            grant = client.create_episode(task_path, episode.workspace)
            episode.save_state({"episode": grant["episode"], "token": grant["token"],
                                "task_path": task_path})
        agent, task = get_agent(record.agent), find_task(episode.state()["task_path"])
        try:
            with episode_gateway(agent.needs_gateway, options.gateway_config, agent.name,
                                 record.episode_id, task.spec.budgets, episode.folder) as gateway:
                reason = run_agent(episode, record, client, grader, gateway, options, events)
        except VtbenchError:
            record.status = "failed"
            episode.save(record)
            raise
        events(f"agent stopped ({reason}); scoring the submission on the hidden test split")
        return finalize(episode, record, client, reason)
