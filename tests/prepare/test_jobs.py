"""prepare's job runner: list order, readiness, failures, jobs that can never start."""

import threading
import time

import pytest

from vtbench.prepare.jobs import Job, JobsStuck, run_jobs


def recorder(log: list[str], name: str, seconds: float = 0.0):
    def run() -> None:
        log.append(f"start {name}")
        time.sleep(seconds)
        log.append(f"end {name}")
    return run


def test_one_worker_runs_ready_jobs_in_list_order() -> None:
    log: list[str] = []
    run_jobs([Job(n, recorder(log, n)) for n in "abc"], workers=1)
    assert log == ["start a", "end a", "start b", "end b", "start c", "end c"]


def test_a_job_waiting_for_another_starts_as_soon_as_it_is_ready() -> None:
    log: list[str] = []
    made = threading.Event()

    def make() -> None:
        recorder(log, "make", 0.2)()
        made.set()

    jobs = [Job("make", make), Job("long", recorder(log, "long", 1.0)),
            Job("use", recorder(log, "use"), ready=made.is_set)]
    run_jobs(jobs, workers=2)
    assert log.index("start use") > log.index("end make")
    assert log.index("start use") < log.index("end long")


def test_the_first_failure_stops_new_jobs_and_is_raised_after_running_ones_end() -> None:
    log: list[str] = []

    def fail() -> None:
        time.sleep(0.1)
        raise RuntimeError("out of memory")

    jobs = [Job("fail", fail), Job("slow", recorder(log, "slow", 0.5)),
            Job("later", recorder(log, "later"))]
    with pytest.raises(RuntimeError, match="out of memory"):
        run_jobs(jobs, workers=2)
    assert log == ["start slow", "end slow"]


def test_jobs_that_can_never_become_ready_raise_instead_of_hanging() -> None:
    log: list[str] = []
    jobs = [Job("a", recorder(log, "a")), Job("orphan", recorder(log, "orphan"),
                                              ready=lambda: False)]
    with pytest.raises(JobsStuck, match="orphan"):
        run_jobs(jobs, workers=2)
    assert log == ["start a", "end a"]
