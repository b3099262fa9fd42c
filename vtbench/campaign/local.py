"""The local executor: every episode a process on this host (:mod:`vtbench.campaign.attempt`).

As many episodes run at once as the plan's ``concurrency`` allows and as fit on this host:
the running episodes' task ``resources`` (cores, GPUs, memory) never add up to more than
the host has, and a task the host could never fit is refused before anything is written.
Each episode's runner reserves its own cores (:mod:`vtbench.reservation`), so the episodes
run on disjoint sets of cores; only a plan that says ``shared`` may place more episodes
than the host has cores for, and their results say "shared".
Before the first episode every task that is not prepared (or was prepared from an older
version of it) is prepared, with its progress in the campaign's log. The campaign then
holds the host's grader (:func:`running_grader`) while it runs, so the grader that every
episode shares is not stopped and started again between two episodes.
"""

import socket
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from vtbench.campaign.attempt import Attempt, AttemptResult, Running
from vtbench.campaign.errors import PlanError
from vtbench.campaign.folder import CampaignFolder
from vtbench.campaign.plan import Plan, PlannedEpisode
from vtbench.campaign.progress import CampaignProgress
from vtbench.episode.grader_process import running_grader
from vtbench.errors import NotPrepared
from vtbench.gpus import host_gpus
from vtbench.prepare import load_prepared, prepare_task
from vtbench.prepare.progress import log_reporter
from vtbench.reservation import host_cores
from vtbench.tasks import find_task

CGROUP_MEMORY_LIMITS = (Path("/sys/fs/cgroup/memory.max"),
                        Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def host_memory_gb() -> float:
    """The host's memory, or this process's cgroup limit where that is lower."""
    total = 0.0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            total = int(line.split()[1]) * 1024
    for limit in CGROUP_MEMORY_LIMITS:
        text = limit.read_text().strip() if limit.exists() else "max"
        if text.isdigit():
            total = min(total, int(text))
    return total / 1024**3


@dataclass(frozen=True)
class Capacity:
    """What episodes may take of a host at once."""

    cpus: int
    gpus: int
    memory_gb: float

    @classmethod
    def of_host(cls) -> "Capacity":
        return cls(cpus=len(host_cores()), gpus=len(host_gpus()), memory_gb=host_memory_gb())

    def fits(self, running: Sequence[PlannedEpisode], episode: PlannedEpisode,
             shared: bool = False) -> bool:
        """Whether ``episode`` fits beside ``running``; ``shared`` episodes share cores, so
        only each one's own cores must fit."""
        used = [*running, episode]
        cores = episode.cpus if shared else sum(e.cpus for e in used)
        return (cores <= self.cpus and sum(e.gpus for e in used) <= self.gpus
                and sum(e.memory_gb for e in used) <= self.memory_gb)

    def refuse_impossible(self, plan: Plan) -> None:
        for episode in plan.episodes:
            if not self.fits([], episode):
                raise PlanError(
                    f"task {episode.task_id} needs {episode.cpus} CPUs, {episode.gpus} GPUs and "
                    f"{episode.memory_gb:g} GB; this host has {self.cpus} CPUs, {self.gpus} GPUs "
                    f"and {self.memory_gb:.1f} GB", hint="run it with --executor ray on a "
                    "cluster that has such a node")


def prepare_missing(tasks: Sequence[str], sandbox: str, progress: CampaignProgress) -> None:
    """Prepare each of ``tasks`` (paths) that is not prepared as it is now."""
    for path in tasks:
        task = find_task(path)
        try:
            load_prepared(task)
            continue
        except NotPrepared as err:
            progress.line(f"{err}: preparing it (once, before its episodes)")
        started = time.monotonic()
        prepare_task(task, report=log_reporter(lambda text: progress.line(f"prepare {text}")),
                     sandbox=sandbox)
        progress.line(f"task {task.id} prepared in {time.monotonic() - started:.0f} s")


class LocalExecutor:
    """Episodes as processes of this host."""

    name = "local"

    def __init__(self, capacity: Capacity | None = None) -> None:
        self.capacity = capacity or Capacity.of_host()
        self.node = socket.gethostname()
        self.running: dict[str, Running] = {}
        self.held = ExitStack()
        self.shared = False

    def check(self, plan: Plan) -> None:
        self.capacity.refuse_impossible(plan)
        self.shared = plan.shared

    def ready(self, plan: Plan, tasks: Sequence[str], progress: CampaignProgress) -> None:
        prepare_missing(tasks, plan.sandbox, progress)
        self.held.enter_context(running_grader(plan.sandbox))

    def can_start(self, running: Sequence[PlannedEpisode], episode: PlannedEpisode) -> bool:
        return self.capacity.fits(running, episode, self.shared)

    def start(self, attempt: Attempt, folder: CampaignFolder) -> None:
        key = attempt.episode.key
        self.running[key] = Running(attempt, folder.slot(key), folder.set_aside(key), self.node)

    def poll(self, timeout: float) -> list[tuple[str, AttemptResult]]:
        deadline = time.monotonic() + timeout
        while True:
            ended = [(key, result) for key, running in self.running.items()
                     if (result := running.poll()) is not None]
            for key, _ in ended:
                del self.running[key]
            if ended or time.monotonic() >= deadline:
                return ended
            time.sleep(0.2)

    def close(self) -> None:
        for running in self.running.values():
            running.stop()
        self.running.clear()
        self.held.close()
