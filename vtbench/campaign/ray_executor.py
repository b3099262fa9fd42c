"""The Ray executor: one Ray task per episode attempt, on whichever node has room.

What Ray does not do by itself (measured facts in the project's Ray notes), this does:

- A request that can never fit is refused before anything is submitted: each task's
  ``resources`` (CPUs, GPUs, memory) against every alive node's (Ray would leave it
  pending for ever). Each node that could run a task must hold that task prepared in its
  own private store; a probe pinned to the node checks it, and a node that does not is
  named in the refusal. All of this happens before the campaign folder is written.
- Ray places an episode by the ``CPU`` count a node advertises, which ``ray start
  --num-cpus`` may set above its cores: a node that advertises more CPUs than it has cores
  for vtbench to reserve is refused (unless the plan says ``shared``), so Ray never places
  more episodes on a host than its runners can give disjoint cores
  (:mod:`vtbench.reservation`).
- An episode runs on its node exactly as on the local executor
  (:mod:`vtbench.campaign.attempt`): its own process and session, killed when the Ray
  worker running it dies, the rest of its process group killed when it ends. Ray's own
  retries are off: the campaign's ledger retries.
- Each node that can run an episode holds its grader for the whole campaign, as the local
  executor holds the host's: an actor pinned to the node (:class:`NodeGrader`) starts it
  or joins the one running, so an episode never pays a grader's start and stop.
- The episode folder is made in a scratch folder of the node (under its ``$VTBENCH_HOME``)
  and comes back as a tar archive, unpacked into the campaign folder (links that leave the
  folder, device files and the like are skipped; the snapshot repository is pointed at the
  workspace where it now lies). A scratch folder left by a campaign that died is resumed
  there by the episode's next attempt on that node.
- Nothing leaves the machine: usage statistics are off and their report address is the
  loopback; a private Ray (no ``--address``) runs without its dashboard. ``ray stop`` is
  never called: it kills Ray processes machine-wide, not only ours.
"""

import contextlib
import hashlib
import io
import os
import shutil
import socket
import subprocess
import tarfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from vtbench import layout
from vtbench.campaign.attempt import (
    Attempt,
    AttemptResult,
    Running,
    episode_folders,
    move_aside,
)
from vtbench.campaign.errors import PlanError
from vtbench.campaign.folder import CampaignFolder
from vtbench.campaign.local import Capacity
from vtbench.campaign.plan import Plan, PlannedEpisode
from vtbench.campaign.progress import CampaignProgress
from vtbench.episode.disk import WorkspaceDisk
from vtbench.episode.grader_process import running_grader
from vtbench.errors import MissingDependency, VtbenchError
from vtbench.layout import EpisodePaths
from vtbench.prepare import load_prepared
from vtbench.sandbox import ALLOW_WEAK_LIMITS_ENV
from vtbench.tasks import find_task

QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/"}
"""Set before Ray is imported: no usage statistics, and their address is the loopback."""
ANSWER_SECONDS = 5.0
PRIVATE_OBJECT_STORE_BYTES = 100_000_000
RELEASE_SECONDS = 30.0
"""How long closing waits for the nodes' graders to be let go (and stopped, if unused)."""


def answers(address: str) -> None:
    """Refuse an address that is not ``host:port`` or where nothing accepts a connection."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        raise PlanError(f"Ray address {address!r} is not host:port",
                        hint="give the head node's address, e.g. 10.0.0.5:6379")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=ANSWER_SECONDS).close()
    except OSError as err:
        raise PlanError(f"the Ray cluster at {address} does not answer ({err.strerror or err})",
                        hint="start it (ray start --head) or pass the right --address") from None


def import_ray() -> Any:
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    try:
        import ray
    except ImportError:
        raise MissingDependency("the Ray executor needs ray",
                                hint="pip install 'vtbench[cluster]'") from None
    return ray


def node_fits(node: dict[str, Any], episode: PlannedEpisode) -> bool:
    have = node["Resources"]
    return (have.get("CPU", 0) >= episode.cpus and have.get("GPU", 0) >= episode.gpus
            and have.get("memory", 0) >= episode.memory_gb * 1024**3)


def probe_prepared(task_paths: list[str]) -> dict[str, str | None]:
    """On a node: why each task cannot run there (None where it is prepared)."""
    found: dict[str, str | None] = {}
    for path in task_paths:
        try:
            load_prepared(find_task(path))
            found[path] = None
        except VtbenchError as err:
            found[path] = err.one_line()
    return found


def probe_cores() -> int:
    """On a node: how many cores vtbench may reserve there."""
    from vtbench.reservation import host_cores

    return len(host_cores())


def node_name() -> str:
    import ray

    return f"{ray.util.get_node_ip_address()}/{ray.get_runtime_context().get_node_id()[:8]}"


def run_on_node(attempt: Attempt, campaign_id: str) -> dict[str, Any]:
    """The Ray task: run the attempt in the node's scratch slot, return its result and the
    slot as a tar archive, and leave nothing behind."""
    scratch = layout.home() / "campaign-scratch" / campaign_id
    slot, set_aside = scratch / attempt.episode.key, scratch / "set-aside" / attempt.episode.key
    running = Running(attempt, slot, set_aside, node_name())
    try:
        while (result := running.poll()) is None:
            time.sleep(0.5)
    except BaseException:
        running.stop()
        raise
    archive = pack(slot)
    shutil.rmtree(slot)
    shutil.rmtree(set_aside, ignore_errors=True)
    return {"result": result, "archive": archive}


def pack(slot: Path) -> bytes:
    """The slot as an uncompressed tar archive, without its lock and disk images."""
    for folder in episode_folders(slot):
        WorkspaceDisk(EpisodePaths(folder).workspace).detach()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(slot.iterdir()):
            if path.name != "slot.lock":
                archive.add(path, arcname=path.name,
                            filter=lambda m: None if m.name.endswith("workspace.img") else m)
    return buffer.getvalue()


def unpack(archive: bytes, slot: Path) -> None:
    """Into ``slot``: regular files, folders and links that stay inside it."""
    def safe(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        try:
            return tarfile.data_filter(member, path)
        except tarfile.FilterError:
            return None

    slot.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        tar.extractall(slot, filter=safe)
    for folder in episode_folders(slot):
        rehome_snapshots(EpisodePaths(folder))


def rehome_snapshots(episode: EpisodePaths) -> None:
    """Point the snapshot repository at the workspace where it now lies: git refuses every
    command while ``core.worktree`` names the node's scratch folder."""
    config = episode.snapshots / "config"
    if config.is_file():
        subprocess.run(["git", "config", "--file", str(config), "core.worktree",
                        str(episode.workspace)], check=True, capture_output=True)


def pinned(node: dict[str, Any]) -> dict[str, Any]:
    """Ray options that run a task or an actor on ``node`` (and nowhere else), using no CPU."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"num_cpus": 0,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)}


class NodeGrader:
    """A Ray actor pinned to one node: holds that node's grader (started, or joined where one
    runs) from its creation until :meth:`release`, or until it dies with the campaign's
    driver, when the kernel drops its claim."""

    def __init__(self, sandbox: str, allow_weak_limits: bool) -> None:
        if allow_weak_limits:  # the grader's sandboxes read it, as the driver's do
            os.environ[ALLOW_WEAK_LIMITS_ENV] = "1"
        self.held = contextlib.ExitStack()
        self.socket = self.held.enter_context(running_grader(sandbox))

    def ready(self) -> str:
        """The node's grader socket, once the grader answers."""
        return str(self.socket)

    def release(self) -> None:
        self.held.close()


class RayExecutor:
    """Episodes as Ray tasks on a cluster (or on a private single-node Ray)."""

    name = "ray"

    def __init__(self, address: str | None) -> None:
        self.address = address
        self.ray: Any = None
        self.capacity = Capacity(cpus=0, gpus=0, memory_gb=0.0)
        self.refs: dict[Any, tuple[str, CampaignFolder, float]] = {}
        self.runners: list[dict[str, Any]] = []
        """The alive nodes that fit at least one planned episode."""
        self.graders: list[Any] = []
        self.shared = False

    def check(self, plan: Plan) -> None:
        if self.address is not None:
            answers(self.address)
        self.connect()
        nodes = [node for node in self.ray.nodes() if node["Alive"]]
        total = self.ray.cluster_resources()
        self.capacity = Capacity(cpus=int(total.get("CPU", 0)), gpus=int(total.get("GPU", 0)),
                                 memory_gb=total.get("memory", 0) / 1024**3)
        fitting: dict[str, list[dict[str, Any]]] = {}
        for task in sorted({e.task for e in plan.episodes}):
            episode = next(e for e in plan.episodes if e.task == task)
            fitting[task] = [node for node in nodes if node_fits(node, episode)]
            if not fitting[task]:
                raise PlanError(
                    f"task {episode.task_id} needs {episode.cpus} CPUs, {episode.gpus} GPUs and "
                    f"{episode.memory_gb:g} GB on one node; no node of the Ray cluster has that",
                    hint="add such a node, or lower the task's [resources]")
            self.runners += [node for node in fitting[task] if node not in self.runners]
        self.shared = plan.shared
        if not plan.shared:
            self.refuse_oversubscribed(self.runners)
        for task, nodes_of_task in fitting.items():
            self.check_prepared(next(e for e in plan.episodes if e.task == task), nodes_of_task)

    def refuse_oversubscribed(self, nodes: list[dict[str, Any]]) -> None:
        """Refuse a node that advertises more CPUs to Ray than it has cores to reserve."""
        probe = self.ray.remote(probe_cores)
        cores = self.ray.get([probe.options(**pinned(node)).remote() for node in nodes])
        for node, have in zip(nodes, cores, strict=True):
            told = int(node["Resources"].get("CPU", 0))
            if told > have:
                raise PlanError(f"Ray node {node['NodeManagerAddress']} ({node['NodeID'][:8]}) "
                                f"offers {told} CPUs but has {have} cores for episodes to "
                                "reserve: its episodes would share cores",
                                hint=f"start it with ray start --num-cpus {have}, or set "
                                     "shared = true in the campaign file")

    def check_prepared(self, episode: PlannedEpisode, nodes: list[dict[str, Any]]) -> None:
        probe = self.ray.remote(probe_prepared)
        answers_by_node = self.ray.get([probe.options(**pinned(node)).remote([episode.task])
                                        for node in nodes])
        for node, found in zip(nodes, answers_by_node, strict=True):
            if found[episode.task] is not None:
                raise PlanError(f"Ray node {node['NodeManagerAddress']} "
                                f"({node['NodeID'][:8]}) cannot run task {episode.task_id}: "
                                f"{found[episode.task]}",
                                hint=f"prepare it on that node: vtbench prepare --task "
                                     f"{episode.task}")

    def connect(self) -> None:
        if self.ray is not None:
            return
        ray = import_ray()
        if self.address is not None:
            ray.init(address=self.address, logging_level="ERROR", log_to_driver=False)
        else:
            ray.init(address="local", include_dashboard=False, logging_level="ERROR",
                     log_to_driver=False, object_store_memory=PRIVATE_OBJECT_STORE_BYTES)
        self.ray = ray

    def ready(self, plan: Plan, tasks: Sequence[str], progress: CampaignProgress) -> None:
        nodes = [node for node in self.ray.nodes() if node["Alive"]]
        progress.line(f"Ray cluster: {len(nodes)} nodes, {self.capacity.cpus} CPUs, "
                      f"{self.capacity.gpus} GPUs, {self.capacity.memory_gb:.1f} GB")
        holder = self.ray.remote(NodeGrader)
        self.graders = [holder.options(**pinned(node)).remote(plan.sandbox,
                                                             plan.allow_weak_limits)
                        for node in self.runners]
        self.ray.get([grader.ready.remote() for grader in self.graders])
        progress.line(f"graders ready on {len(self.graders)} nodes")

    def can_start(self, running: Sequence[PlannedEpisode], episode: PlannedEpisode) -> bool:
        return self.capacity.fits(running, episode, self.shared)

    def start(self, attempt: Attempt, folder: CampaignFolder) -> None:
        episode = attempt.episode
        task = self.ray.remote(run_on_node).options(
            num_cpus=episode.cpus, num_gpus=episode.gpus,
            memory=int(episode.memory_gb * 1024**3), max_retries=0, name=episode.key)
        ref = task.remote(attempt, campaign_id(folder))
        self.refs[ref] = (episode.key, folder, time.monotonic())

    def poll(self, timeout: float) -> list[tuple[str, AttemptResult]]:
        if not self.refs:
            return []
        ready, _ = self.ray.wait(list(self.refs), num_returns=1, timeout=timeout)
        if ready:
            ready, _ = self.ray.wait(list(self.refs), num_returns=len(self.refs), timeout=0)
        return [self.collect(ref) for ref in ready]

    def collect(self, ref: Any) -> tuple[str, AttemptResult]:
        key, folder, started = self.refs.pop(ref)
        try:
            answer = self.ray.get(ref)
        except self.ray.exceptions.RayError as err:
            reason = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200]}"
            return key, AttemptResult(returncode=None, seconds=time.monotonic() - started,
                                      error=f"the Ray task failed ({reason})",
                                      episode_folder=None, node="ray")
        for earlier in episode_folders(folder.slot(key)):  # of attempts before this one
            move_aside(earlier, folder.set_aside(key))
        unpack(answer["archive"], folder.slot(key))
        # the wall time as the campaign sees it: with Ray's scheduling and the archive's trip
        return key, replace(answer["result"], seconds=time.monotonic() - started)

    def close(self) -> None:
        if self.ray is None:
            return
        for ref in self.refs:
            self.ray.cancel(ref, force=True)
        self.refs.clear()
        with contextlib.suppress(self.ray.exceptions.RayError):
            self.ray.get([grader.release.remote() for grader in self.graders],
                         timeout=RELEASE_SECONDS)
        self.graders.clear()
        self.ray.shutdown()
        self.ray = None


def campaign_id(folder: CampaignFolder) -> str:
    """The campaign's name in nodes' scratch folders: unique per campaign folder."""
    digest = hashlib.sha256(str(folder.root).encode()).hexdigest()[:12]
    return f"{folder.root.name}-{digest}"
