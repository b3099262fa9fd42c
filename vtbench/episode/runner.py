"""The episode runner (trusted): workspace, grader episode, sandboxed agent, finalisation.

Trusts: the grader (scores, ledger, lineage), the sandbox, the prepared task in the private
store. Does not trust: the agent and everything it writes (the workspace is only read
through the grader's intake, and the snapshot history lives outside the workspace).

Before anything of the episode is made, the runner reserves its cores and GPUs
(:mod:`vtbench.reservation`; a resumed episode its own again) and holds them until the
record is written: the research sandbox runs on them (a cpuset), and the grader, told them
in the episode's spec, evaluates the episode's candidates on them. A wait for cores is
charged to nobody.

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
(:mod:`vtbench.episode.disk`). ``--resume`` with a ``close`` reason finishes an episode
whose runner failed after its agent started without running the agent again.
"""

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vtbench import layout
from vtbench.agents import AgentContext, get_agent
from vtbench.agents.llm import runtime_mounts
from vtbench.client import DEADLINE_ENV, GraderClient
from vtbench.episode.disk import WorkspaceDisk, unavailable
from vtbench.episode.gateway_process import config_path, episode_gateway, llm_usage
from vtbench.episode.grader_process import grader_log, running_grader
from vtbench.episode.leak_audit import audit, workspace_copies
from vtbench.episode.plumbing import output_pipe, relayed_sockets
from vtbench.episode.processes import Places, ProcessWatch, load, read_only_places
from vtbench.episode.provenance import provenance
from vtbench.episode.recipe import Snapshots, retraining
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.sandbox import GATEWAY_PORT, research_spec
from vtbench.episode.timesplit import (
    CHECKPOINT_SECONDS,
    SAMPLE_SECONDS,
    TimeSplit,
    charged,
    close,
)
from vtbench.errors import VtbenchError
from vtbench.gpus import (
    MEMORY_FRACTION_ENV,
    SHARED_MEMORY_FRACTION,
    GpusUnavailable,
    episode_gpu_count,
    host_gpus,
)
from vtbench.grader.serve import evaluation_gpus_of_grader
from vtbench.grader.tokens import operator_token
from vtbench.layout import EpisodePaths
from vtbench.prepare import PreparedTask, load_prepared, prepared_by_id
from vtbench.printable import unfailing
from vtbench.reservation import reserve
from vtbench.sandbox import Mount, SandboxProcess, get_sandbox, prepare_writable
from vtbench.spec import AgentChoice, EpisodeSpec, Reservation, Resources
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
    shared: bool = False
    """Take cores that other shared episodes may hold too (``--shared``); the record and
    the report then say "shared" beside the result."""
    wait_for_cores_minutes: float = 0.0
    """How long to wait for free cores and GPUs before refusing (0: refuse at once)."""


def now(at: float | None = None) -> str:
    """ISO-8601 UTC, to the millisecond (the record's times give its wall time)."""
    moment = datetime.now(UTC) if at is None else datetime.fromtimestamp(at, UTC)
    return moment.isoformat(timespec="milliseconds")


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


def episode_spec(prepared: PreparedTask, options: RunOptions) -> EpisodeSpec:
    """The episode's spec, decided here once from the task and the run's options."""
    agent = get_agent(options.agent)
    choice = AgentChoice(name=options.agent,
                         model=options.model if agent.needs_gateway else None,
                         reasoning_effort=options.reasoning_effort if agent.needs_gateway
                         else None)
    return EpisodeSpec.decide(prepared.id, prepared.digest, prepared.task.spec, choice,
                              options.seed, options.budget_minutes)


def recorded_spec(record: EpisodeRecord, prepared: PreparedTask) -> EpisodeSpec:
    """The spec the episode was started with (a record written before specs existed: the
    one its recorded choices give)."""
    if record.spec is not None:
        return record.spec
    return EpisodeSpec.decide(prepared.id, prepared.digest, prepared.task.spec,
                              AgentChoice(name=record.agent, model=record.model,
                                          reasoning_effort=record.reasoning_effort),
                              record.seed, record.budget_minutes)


def new_episode(task_id: str, options: RunOptions) -> Episode:
    """The folder a new episode will have (not made yet)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    slug = options.agent.replace("command:", "command-").replace("/", "_").replace(" ", "_")[:40]
    return Episode(options.out.resolve() / f"{task_id}-{slug}-s{options.seed}-{stamp}")


def start_episode(prepared: PreparedTask, options: RunOptions, spec: EpisodeSpec,
                  episode: Episode, events: Events,
                  began: float) -> tuple[Episode, EpisodeRecord]:
    task = prepared.task
    agent = get_agent(options.agent)
    episode.folder.mkdir(parents=True)
    limit_disk(episode, spec.resources, events)
    models = workspace_copies(prepared)
    create_workspace(task, episode.workspace, episode.snapshots, models["models/base"],
                     models["models/initial"], spec.budgets)
    record = EpisodeRecord(
        episode_id=episode.folder.name, task=task.id, agent=options.agent, seed=options.seed,
        spec=spec, budget_minutes=spec.budgets.wall_clock_minutes, started_at=now(began),
        initial_val=prepared.initial_val,
        initial_test=prepared.initial_test, reference_test=prepared.reference_test,
        light_gain=prepared.light_gain, reference_gain=prepared.reference_gain,
        model=options.model if agent.needs_gateway else None,
        reasoning_effort=options.reasoning_effort if agent.needs_gateway else None,
        provenance=provenance(prepared, options.sandbox))
    episode.save(record)
    events(f"workspace ready: {episode.workspace}")
    return episode, record


def reserved(spec: EpisodeSpec, holder: str, options: RunOptions,
             events: Events) -> AbstractContextManager[Reservation]:
    """Hold the episode's cores and GPUs: the ones its spec names (a resumed episode), else
    the task's ``resources`` of them, exclusive unless ``--shared``."""
    resources, kept = spec.resources, spec.reservation
    gpus = episode_gpu_count(resources.gpus, resources.optional_gpus)
    return reserve(resources.cpus, gpus, holder, kept.shared if kept else options.shared,
                   exact=kept, wait_seconds=options.wait_for_cores_minutes * 60,
                   on_wait=events)


def limit_disk(episode: Episode, resources: Resources, events: Events) -> None:
    reason = unavailable()
    if reason is None:
        WorkspaceDisk(episode.workspace).create(resources.disk_gb)
        events(f"workspace disk: {resources.disk_gb:g} GB")
    else:
        events(f"warning: the workspace has no disk limit ({reason}); only files over "
               f"{resources.max_file_gb:g} GB are cut off")


def run_agent(episode: Episode, record: EpisodeRecord, spec: EpisodeSpec, task: Task,
              client: GraderClient, sockets: dict[str, Path], options: RunOptions,
              events: Events, began: float, held: Reservation) -> tuple[str, float]:
    """Run the agent in its sandbox, on the episode's reserved cores and GPUs (``held``),
    until it exits, submits or reaches the deadline; returns why it stopped and when its
    last interval ended.
    ``sockets``: the grader's and, for LLM agents, the gateway's; ``began``: when this
    runner started (its set-up until the agent starts is its own time)."""
    state, agent = episode.state(), get_agent(record.agent)
    remaining = spec.wall_clock_seconds - charged(record.spent, began)
    if remaining <= 0:
        record.spent.runner_seconds += time.time() - began
        return "deadline", time.time()
    context = AgentContext(task=task.id, seed=spec.seed,
                           budget_minutes=spec.budgets.wall_clock_minutes,
                           prompt=PROMPT, model=spec.agent.model,
                           reasoning_effort=spec.agent.reasoning_effort,
                           gateway_url=f"http://127.0.0.1:{GATEWAY_PORT}"
                           if "gateway" in sockets else None)
    prepare_writable(episode.workspace)
    with relayed_sockets(sockets) as relayed, output_pipe(episode.agent_log) as output:
        names = {gpu.index: gpu.name for gpu in host_gpus()}
        record.gpus = [f"{index}: {names.get(index, 'unknown')}" for index in held.gpus]
        record.gpu_shared_with_grader = shares_with_grader(held.gpus)
        if record.gpu_shared_with_grader:
            events("GPU shared with the grader (each side may take "
                   f"{SHARED_MEMORY_FRACTION:.0%} of its memory)")
        shared_env = ({MEMORY_FRACTION_ENV: str(SHARED_MEMORY_FRACTION)}
                      if record.gpu_shared_with_grader else {})
        sandbox = research_spec(task, agent, episode.workspace, relayed["grader"],
                                state["token"], remaining, spec.resources, held.cores,
                                gateway_socket=relayed.get("gateway"),
                                extra_env={**agent.environment(context), **shared_env})
        sandbox = sandbox.model_copy(update={
            "mounts": [*sandbox.mounts, *runtime_mounts(agent)], "gpus": held.gpus})
        events("leak audit of everything the agent will see")
        audit_sandbox(task, sandbox.mounts, episode, state)
        deadline = {DEADLINE_ENV: str(int(time.time() + remaining))}
        sandbox = sandbox.model_copy(update={"env": {**sandbox.env, **deadline}})
        record.agent_started_at = record.agent_started_at or now()
        episode.save(record)  # before the agent runs any code
        process = get_sandbox(options.sandbox).start(agent.command(context), sandbox,
                                                     stdout=output, stderr=output)
        events(f"agent {agent.name} started ({remaining / 60:.1f} min left, on "
               f"{held.describe()})")
        processes = ProcessWatch(process.pid, Places(episode.workspace,
                                                     read_only_places(sandbox.mounts)),
                                 save_to=episode.processes)
        return watch(process, processes, client, state["episode"], record, events, began,
                     lambda: episode.save(record))


def shares_with_grader(indexes: list[int]) -> bool:
    """Whether the running grader evaluates on one of these GPUs (it says so in its GPU
    file: a grader that shares its GPU on a one-GPU host)."""
    evaluating, shared = evaluation_gpus_of_grader(layout.grader_gpus_file())
    return shared and bool(set(indexes) & set(evaluating))


def audit_sandbox(task: Task, mounts: list[Mount], episode: Episode,
                  state: dict[str, Any]) -> None:
    """The leak audit of what the sandbox will show. The workspace is searched while it is
    as the runner made it (``workspace_as_made`` in the runner's state, set when the
    episode is created); once audited it is the agent's own work (a task's public
    generator can draw a test item by chance, as arith's reference solution does when it
    synthesises problems), so a resumed episode's audit covers the rest of the sandbox. The
    models the runner copied into it are not read again: their sources are searched."""
    roots, as_made = [mount.source for mount in mounts], state.get("workspace_as_made")
    if not as_made:
        roots = [root for root in roots if not root.is_relative_to(episode.workspace)]
    copies = {episode.workspace / place: Path(source)
              for place, source in state.get("model_copies", {}).items()} if as_made else {}
    audit(task, roots, own=episode.workspace, copies=copies)
    episode.save_state({**state, "workspace_as_made": False})


def watch(process: SandboxProcess, processes: ProcessWatch, client: GraderClient,
          episode_id: str, record: EpisodeRecord, events: Events, began: float,
          save: Callable[[], None]) -> tuple[str, float]:
    """Follow the agent until it exits, submits (then stop it) or reaches the deadline;
    returns why, and when the agent's last counted interval ended. The runner's time from
    ``began`` until the agent's first interval is its own (set-up, the sandbox's start).
    ``processes`` samples the sandbox's tree (training, and what each training ran). The
    record, with its time split so far, is saved (``save``) every
    :data:`CHECKPOINT_SECONDS`."""
    seen, split = 0, TimeSplit(processes, record.spent)
    record.spent.runner_seconds += split.last - began
    saved_at = time.time()
    while process.poll() is None:
        time.sleep(SAMPLE_SECONDS)
        seen, grading, submitted = read_ledger(client, episode_id, seen, events)
        split.tick(grading)
        if submitted:
            events("submission recorded; stopping the agent")
            process.kill_tree()
            return "submitted", split.last
        if time.time() - saved_at >= CHECKPOINT_SECONDS:
            saved_at = time.time()
            save()
    split.tick(grading=False)
    if process.killed_by_limit == "wall_seconds":
        return "deadline", split.last
    return "agent_exited", split.last


def read_ledger(client: GraderClient, episode_id: str, seen: int,
                events: Events) -> tuple[int, bool, bool]:
    """Report the validations that settled after the first ``seen``; returns how many have
    settled, whether one is pending and whether the agent has submitted."""
    history = client.history(episode_id)
    settled = [v for v in history.validations if v.score is not None or v.error is not None]
    for validation in settled[seen:]:
        outcome = validation.score if validation.error is None else "failed"
        events(f"validation {validation.index}: {validation.candidate} -> {outcome}")
    return len(settled), len(settled) < len(history.validations), history.submission is not None


def finalize(episode: Episode, record: EpisodeRecord, client: GraderClient,
             stop_reason: str, agent_ended: float, task: Task) -> EpisodeRecord:
    """Score the submission on test (grader side) and complete the record, with what it
    takes to retrain the submission; the runner's time from ``agent_ended`` on is its own,
    but for the test scoring."""
    state = episode.state()
    scoring = time.time()
    result = client.finish(state["episode"])
    record.spent.grading_seconds += time.time() - scoring
    record.spent.runner_seconds -= time.time() - scoring
    history = client.history(state["episode"])
    started = datetime.fromisoformat(record.started_at).timestamp()
    record.validations, record.submission = history.validations, history.submission
    record.candidates = history.candidates
    record.processes = load(episode.processes)
    record.submitted = record.submission is not None
    if record.submission is not None:
        record.retraining = retraining(
            record.submission, record.candidates, task.spec.components.trainer.entry,
            record.seed, Snapshots(episode.snapshots, episode.workspace))
    record.final_test = result.test_score if record.submitted else record.initial_test
    record.gain = result.gain if record.submitted else 0.0
    record.normalized_gain = result.normalised_gain if record.submitted else 0.0
    record.spent.runner_seconds += time.time() - agent_ended
    close(record.spent, time.time() - started)
    record.spent.validations = record.validations_used
    record.spent.grader_compute_seconds = round(
        sum(v.compute_seconds for v in record.validations), 1)
    record.llm = llm_usage(episode.folder, record.episode_id)
    record.status, record.stop_reason, record.ended_at = "finished", stop_reason, now()
    episode.save(record)
    return record


def run_episode(options: RunOptions, events: Events = lambda line: None, resume: Path | None = None,
                close: str | None = None) -> tuple[EpisodeRecord, Path]:
    """Run (or resume) one episode; returns the finished record and its path. The task is
    resolved and checked against its preparation once, here. ``close`` (with ``resume``):
    why the episode's runner failed after its agent started; the episode is then finished
    without its agent, with what the grader's ledger holds. ``events`` is made unable to
    raise, and its lines printable (they quote candidate names): no line can stop the
    episode."""
    began, events = time.time(), unfailing(events)
    if resume is not None:
        episode = Episode(resume.resolve())
        record = episode.load()
        if record.status == "finished":
            WorkspaceDisk(episode.workspace).settle()
            return record, episode.record
        if close is not None and record.agent_started_at is None:
            raise VtbenchError(f"the agent of {episode.folder} never started: nothing to close",
                               hint="resume it without --close")
        prepared = prepared_by_id(record.task, record.provenance.task_digest)
        spec = recorded_spec(record, prepared)
    else:
        task = find_task(options.task)
        refuse_missing_gpus(task)
        refuse_unconfigured_agent(options)
        prepared = load_prepared(task)
        spec, episode = episode_spec(prepared, options), new_episode(task.id, options)
    with reserved(spec, f"episode {episode.folder.name}", options, events) as held:
        began = time.time()  # a wait for cores is nobody's time
        events(f"reserved {held.describe()}")
        if resume is None:
            spec = spec.model_copy(update={"reservation": held})
            episode, record = start_episode(prepared, options, spec, episode, events, began)
        disk = WorkspaceDisk(episode.workspace)
        try:
            disk.attach()
            record = run_started(episode, record, options, events, began, prepared, held,
                                 close)
            disk.settle()
        finally:
            disk.detach()
    return record, episode.record


def refuse_missing_gpus(task: Task) -> None:
    """Refuse at once a task that asks for more GPUs than this host may hand out."""
    wanted, present = task.spec.resources.gpus, len(host_gpus())
    if wanted > present:
        raise GpusUnavailable(f"task {task.id} needs {wanted} GPU(s); this host has {present} "
                              f"that vtbench may use", hint="run it on a GPU host "
                              "($VTBENCH_GPUS and `vtbench grader gpus` show which)")


def refuse_unconfigured_agent(options: RunOptions) -> None:
    """Refuse at once an LLM agent whose gateway has no configuration."""
    agent = get_agent(options.agent)
    if agent.needs_gateway:
        config_path(options.gateway_config, agent.name)


def run_started(episode: Episode, record: EpisodeRecord, options: RunOptions,
                events: Events, began: float, prepared: PreparedTask, held: Reservation,
                close: str | None = None) -> EpisodeRecord:
    """From the grader's episode to the finished record, on the cores and GPUs ``held``
    (``close``: see :func:`run_episode`)."""
    spec = recorded_spec(record, prepared)
    with running_grader(options.sandbox) as grader:
        events(f"grader log: {grader_log()}")
        client = GraderClient(grader, operator_token())
        if not episode.runner_state.exists():
            grant = client.create_episode(spec, episode.workspace)
            copies = {place: str(source) for place, source in workspace_copies(prepared).items()}
            episode.save_state({"episode": grant.episode, "token": grant.token,
                                "workspace_as_made": True, "model_copies": copies})
        if close is not None:
            events("closing the episode without its agent: scoring what the ledger holds")
            record.runner_failure = close
            return finalize(episode, record, client, "runner_failed", began,
                            prepared.task)
        agent, task = get_agent(record.agent), prepared.task
        try:
            with episode_gateway(agent.needs_gateway, options.gateway_config, agent.name,
                                 record.episode_id, spec.budgets, episode.folder) as gateway:
                sockets = {"grader": grader, **({"gateway": gateway} if gateway else {})}
                reason, agent_ended = run_agent(episode, record, spec, task, client, sockets,
                                                options, events, began, held)
        except VtbenchError:
            record.status = "failed"
            episode.save(record)
            raise
        events(f"agent stopped ({reason}); scoring the submission on the hidden test split")
        return finalize(episode, record, client, reason, agent_ended, task)
