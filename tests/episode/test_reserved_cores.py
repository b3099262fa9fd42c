"""An episode reserves cores before it starts: its research sandbox runs on them (read from
``/proc/self/status`` inside the real sandbox), the grader is told them in the episode's
spec, the record names them; a run on a host whose cores are taken waits or is refused
naming their holder, and a shared run says so."""

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from vtbench import layout
from vtbench.cli.run import summary
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.reservation import CoreAllocator, CoresTaken, host_cores
from vtbench.sandbox import cgroup_limits, parse_core_list


def held_by() -> str:
    """What holds a bwrap sandbox on its cores on this host."""
    return "cpuset" if "cpuset" in cgroup_limits().controllers else "affinity"


READ_CORES = ("grep Cpus_allowed_list /proc/self/status > cores.txt && "
              "vtbench validate --model models/initial && vtbench submit --model models/initial")


@pytest.mark.slow
def test_the_research_sandbox_runs_on_the_reserved_core_and_the_record_and_grader_name_it(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, path = run_episode(RunOptions(task=str(prepared_arith), agent=f"command:{READ_CORES}",
                                          out=tmp_path, budget_minutes=3))
    assert record.spec is not None and record.spec.reservation is not None
    held = record.spec.reservation
    assert len(held.cores) == 1 and held.gpus == [] and not held.shared  # arith: cpus = 1
    told = (path.parent / "workspace" / "cores.txt").read_text().split()[1]
    assert parse_core_list(told) == held.cores
    assert record.validations_used == 1 and record.submitted
    expected = held_by()
    assert record.provenance.cores_held_by == expected
    assert summary(record, path)["reserved"] == f"cores {held.cores[0]}; GPUs none ({expected})"
    ledger = sqlite3.connect(layout.grader_db())
    specs = [json.loads(detail)["spec"] for (detail,) in ledger.execute(
        "SELECT detail FROM events WHERE kind = 'episode_spec'")]
    assert any(spec["reservation"]["cores"] == held.cores and spec["seed"] == record.seed
               for spec in specs)


def test_a_run_on_a_host_whose_cores_are_taken_is_refused_naming_the_holder(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    every = host_cores()
    with CoreAllocator().hold(len(every), "episode elsewhere"), \
            pytest.raises(CoresTaken) as refused:
        run_episode(RunOptions(task=str(prepared_arith), agent="noop", out=tmp_path / "runs"))
    line = refused.value.one_line()
    assert "needs 1 core(s)" in line and f"{every[0]} by episode elsewhere (pid " in line
    assert "--wait-for-cores" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_run_that_may_wait_starts_once_the_cores_are_free_and_a_shared_run_says_so(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    every, release, heard = host_cores(), threading.Event(), []
    taken = threading.Event()

    def hold() -> None:
        with CoreAllocator().hold(len(every), "episode elsewhere"):
            taken.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(10)
    threading.Timer(2.0, release.set).start()
    record, path = run_episode(
        RunOptions(task=str(prepared_arith), agent="noop", out=tmp_path, shared=True,
                   wait_for_cores_minutes=1), events=heard.append)
    holder.join()
    assert any(line.startswith("waiting for cores:") and "episode elsewhere" in line
               for line in heard)
    assert record.submitted and record.spec is not None and record.spec.reservation is not None
    assert record.spec.reservation.shared
    assert summary(record, path)["reserved"].endswith(f"; shared ({held_by()})")
