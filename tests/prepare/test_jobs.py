"""prepare's job runner: list order, readiness, failures, jobs that can never start."""

import threading
import time

import pytest

from vtbench.prepare.jobs import Job, JobsStuck, RunAlone, run_jobs


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


def test_a_job_that_must_run_alone_runs_again_once_the_others_ended_and_nothing_beside_it(
        ) -> None:
    log: list[str] = []

    def beside_others() -> None:
        log.append("start big")
        time.sleep(0.1)
        raise RunAlone("out of its share of the GPU's memory")

    jobs = [Job("big", beside_others, run_alone=recorder(log, "big alone", 0.2)),
            Job("a", recorder(log, "a", 0.3)), Job("b", recorder(log, "b", 0.1)),
            Job("c", recorder(log, "c"))]
    run_jobs(jobs, workers=2)
    alone = log.index("start big alone")
    assert log[alone + 1] == "end big alone", "nothing may start beside a job run alone"
    assert log.index("end a") < alone < log.index("start b"), "the others wait for it"
    assert sorted(entry for entry in log if entry.startswith("end")) == [
        "end a", "end b", "end big alone", "end c"]


def test_a_job_without_a_way_to_run_alone_fails_as_any_failure_does() -> None:
    def fail() -> None:
        raise RunAlone("out of its share of the GPU's memory")

    with pytest.raises(RunAlone, match="share"):
        run_jobs([Job("big", fail)], workers=2)
