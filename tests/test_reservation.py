"""Host-level reservations of cores: disjoint between holders, shared only when asked,
waited for or refused naming who holds what, and never leaked by a holder that dies. The
claim files and their locks are real; the cores are the list each allocator is given."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from vtbench.gpus import Gpu, GpuAllocator, GpusUnavailable
from vtbench.reservation import CoreAllocator, CoresTaken, reserve
from vtbench.spec import Reservation


def test_two_holders_get_disjoint_cores_and_a_third_is_refused_naming_each_holder() -> None:
    cores = CoreAllocator([0, 1])
    with cores.hold(1, "episode a") as first, cores.hold(1, "episode b") as second:
        assert sorted(first + second) == [0, 1]
        with pytest.raises(CoresTaken) as refused, cores.hold(1, "episode c"):
            pass
        line = refused.value.one_line()
        assert "episode c needs 1 core(s); of this host's cores 0,1" in line
        assert f"{first[0]} by episode a (pid " in line and f"{second[0]} by episode b" in line
        assert "--wait-for-cores" in line
    with cores.hold(2, "episode d") as both:
        assert both == [0, 1]
    assert cores.claims() == []


def test_a_request_that_cannot_be_met_takes_nothing() -> None:
    cores = CoreAllocator([0, 1, 2])
    with cores.hold(2, "episode a"):
        with pytest.raises(CoresTaken), cores.hold(2, "episode b"):
            pass
        with cores.hold(1, "episode c") as one:
            assert len(one) == 1


def test_a_waiting_request_gets_the_cores_once_their_holder_leaves() -> None:
    cores, heard = CoreAllocator([0]), []
    leave = threading.Event()

    def hold_then_leave() -> None:
        with cores.hold(1, "episode a"):
            leave.wait(10)

    holder = threading.Thread(target=hold_then_leave)
    holder.start()
    while not cores.claims():
        time.sleep(0.01)
    threading.Timer(1.5, leave.set).start()
    started = time.monotonic()
    with cores.hold(1, "episode b", wait_seconds=30, on_wait=heard.append) as got:
        assert got == [0] and time.monotonic() - started >= 1.0
    holder.join()
    assert len(heard) == 1 and "0 by episode a" in heard[0]


def test_a_holder_killed_with_sigkill_leaves_its_cores_free() -> None:
    script = ("import time\nfrom vtbench.reservation import CoreAllocator\n"
              "with CoreAllocator([0, 1]).hold(2, 'doomed'):\n"
              "    print('held', flush=True)\n    time.sleep(600)\n")
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert holder.stdout and holder.stdout.readline().strip() == "held"
    cores = CoreAllocator([0, 1])
    with pytest.raises(CoresTaken, match="doomed"), cores.hold(1, "episode"):
        pass
    holder.kill()
    holder.wait()
    with cores.hold(2, "episode") as both:
        assert both == [0, 1]


def test_shared_holders_share_cores_with_each_other_but_never_with_an_exclusive_one() -> None:
    cores = CoreAllocator([0, 1])
    with cores.hold(1, "exclusive") as alone, cores.hold(1, "shared a", shared=True) as a, \
                cores.hold(1, "shared b", shared=True) as b:
        assert a == b and a != alone  # the one core no exclusive claim holds
        with pytest.raises(CoresTaken, match=r"shared a \(pid \d+, shared\)"), \
                    cores.hold(2, "exclusive 2"):
            pass


def test_a_resumed_episode_takes_its_own_cores_again_or_is_refused_naming_their_holder() -> None:
    cores = CoreAllocator([0, 1])
    with cores.hold(1, "episode a", exact=[1]) as got:
        assert got == [1]
        with pytest.raises(CoresTaken, match=r"needs cores 1; .*1 by episode a"), \
                cores.hold(1, "episode b", exact=[1]):
            pass
    with pytest.raises(CoresTaken, match="cores 7 are not this host's"), \
            cores.hold(1, "episode c", exact=[7]):
        pass


def test_an_episode_reservation_names_its_cores_and_gpus_and_whether_it_is_shared() -> None:
    with reserve(1, 0, "episode a") as held:
        assert len(held.cores) == 1 and held.gpus == [] and not held.shared
        with pytest.raises(CoresTaken, match="episode b needs cores"), \
                reserve(1, 0, "episode b", exact=held):
            pass
    assert Reservation(cores=[0, 1], gpus=[3], shared=True).describe() == \
        "cores 0,1; GPUs 3; shared"


def test_a_request_for_more_cores_than_the_host_has_is_refused_at_once_even_when_it_may_wait(
        ) -> None:
    started = time.monotonic()
    with pytest.raises(CoresTaken) as refused, CoreAllocator([0, 1]).hold(
            3, "episode a", wait_seconds=60):
        pass
    assert time.monotonic() - started < 5
    assert "needs 3 core(s)" in str(refused.value) and "more cores" in refused.value.one_line()


def test_private_stores_that_share_a_reservations_folder_never_share_a_core_or_a_gpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [Gpu(0, "NVIDIA H100")]
    monkeypatch.setenv("VTBENCH_HOME", str(tmp_path / "store-a"))
    with CoreAllocator([0, 1]).hold(2, "episode of a"), GpuAllocator(gpus).hold(1, "episode of a"):
        monkeypatch.setenv("VTBENCH_HOME", str(tmp_path / "store-b"))
        with CoreAllocator([0, 1]).hold(2, "episode of b"), GpuAllocator(gpus).hold(1, "b"):
            pass  # without a shared folder each store sees only its own claims
    monkeypatch.setenv("VTBENCH_RESERVATIONS", str(tmp_path / "host"))
    monkeypatch.setenv("VTBENCH_HOME", str(tmp_path / "store-a"))
    with CoreAllocator([0, 1]).hold(1, "episode of a"), GpuAllocator(gpus).hold(1, "episode of a"):
        monkeypatch.setenv("VTBENCH_HOME", str(tmp_path / "store-b"))
        with CoreAllocator([0, 1]).hold(1, "episode of b") as other:
            assert other == [1]
        with pytest.raises(CoresTaken, match="episode of a"), \
                CoreAllocator([0, 1]).hold(2, "episode of b"):
            pass
        with pytest.raises(GpusUnavailable, match="0 of the host's 1 are free"), \
                GpuAllocator(gpus).hold(1, "episode of b"):
            pass
        assert GpuAllocator(gpus).holders() == {0: f"episode of a (pid {os.getpid()})"}
    assert (tmp_path / "host" / "gpus" / "0.lock").is_file()
