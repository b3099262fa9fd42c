"""Run prepare's jobs on a few worker threads, in order, each once it is ready.

A worker takes the first job in list order whose ``ready()`` is true, so a job that waits
for another's result (an evaluation that reuses a model still in training) lets the ones
behind it go first and starts as soon as it can, not after every other job. The first
failure stops new jobs from starting and is raised once the running ones have ended, except
:class:`RunAlone`: a job that could not run beside others (it needs the whole GPU) runs again
by itself, with its ``run_alone``, once the running ones have ended; nothing else starts
until it has.
"""

import threading
from collections.abc import Callable
from dataclasses import dataclass

from vtbench.errors import VtbenchError


class JobsStuck(VtbenchError):
    """Jobs remain that nothing running can make ready."""


class RunAlone(VtbenchError):
    """Raised by a job that failed for want of what the jobs beside it held (a share of a
    GPU's memory too small): it is run again alone."""


@dataclass
class Job:
    name: str
    run: Callable[[], None]
    ready: Callable[[], bool] = lambda: True
    run_alone: Callable[[], None] | None = None
    """What to run instead once the job has raised :class:`RunAlone` (None: it fails)."""
    alone: bool = False


class _Queue:
    def __init__(self, jobs: list[Job]) -> None:
        self.pending = list(jobs)
        self.running = 0
        self.alone_running = False
        self.errors: list[BaseException] = []
        self.changed = threading.Condition()

    def take(self) -> Job | None:
        """The next ready job, waiting while only running jobs can make one ready;
        None when there is nothing left to start."""
        with self.changed:
            while self.pending and not self.errors:
                job = self._startable()
                if job is not None:
                    self.pending.remove(job)
                    self.running += 1
                    self.alone_running = job.alone
                    return job
                if self.running == 0 and not any(j.alone for j in self.pending):
                    names = ", ".join(j.name for j in self.pending)
                    self.errors.append(JobsStuck(f"jobs that can never start: {names}"))
                    break
                self.changed.wait()
            return None

    def _startable(self) -> Job | None:
        """The first ready job; while a job waits to run alone, only it, once nothing runs."""
        if self.alone_running:
            return None
        waiting = next((j for j in self.pending if j.alone), None)
        if waiting is not None:
            return waiting if self.running == 0 else None
        return next((j for j in self.pending if j.ready()), None)

    def finish(self, job: Job, error: BaseException | None) -> None:
        with self.changed:
            self.running -= 1
            self.alone_running = self.alone_running and not job.alone
            if isinstance(error, RunAlone) and job.run_alone is not None and not job.alone:
                self.pending.insert(0, Job(job.name, job.run_alone, alone=True))
            elif error is not None:
                self.errors.append(error)
            self.changed.notify_all()


def run_jobs(jobs: list[Job], workers: int) -> None:
    queue = _Queue(jobs)

    def work() -> None:
        while (job := queue.take()) is not None:
            try:
                job.run()
            except Exception as error:
                queue.finish(job, error)
            else:
                queue.finish(job, None)

    threads = [threading.Thread(target=work, name=f"prepare-{n}")
               for n in range(max(1, min(workers, len(jobs))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if queue.errors:
        raise queue.errors[0]
