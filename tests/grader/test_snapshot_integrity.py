"""The snapshot history holds only snapshots that something names: a request the ledger
refuses after its snapshot takes the snapshot back (real grader, real git)."""

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.grader.conftest import GraderProcess
from tests.grader.test_service_integrity import commits, variant, with_snapshots
from vtbench.grader import Ledger


def test_snapshots_of_validations_that_lost_the_race_for_the_last_credit_are_withdrawn(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    git_dir = with_snapshots(workspace)
    with (workspace / "data" / "big.bin").open("wb") as handle:  # a snapshot takes a while
        handle.write(b"\0" * (96 << 20))
    grader.start()
    token = grader.create_episode(small_task, workspace, validations=1)
    names = [variant(workspace, index) for index in range(6)]

    def request(name: str) -> int:
        with grader.client(token) as agent:
            return agent.post("/v1/validations", json={"model": name, "wait": False}).status_code

    with ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(request, names))
    assert sorted(codes) == [202] + [429] * 5
    episode = grader.client(token).get("/v1/status").json()["episode"]
    (validation,) = Ledger().validations(episode)
    head = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert commits(git_dir) == 1 and head == validation.inputs["snapshot"]
