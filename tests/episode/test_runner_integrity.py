"""The runner with a real agent in its real research sandbox: the agent learns no host path
of the operator's, and a submission whose intake outlives the episode ends it cleanly."""

import json
import os
from pathlib import Path

import pytest

from vtbench import layout
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.grader import Ledger
from vtbench.layout import EpisodePaths

PROBE = ("python -c 'import os; print(*(os.readlink(f\"/proc/self/fd/{n}\") for n in (1, 2)),"
         " file=open(\"fds.txt\", \"w\"))'; cat /proc/self/mountinfo > mountinfo.txt; "
         "vtbench status --json > status.json; echo agent says hello")

LATE = r"""
set -e
cp -r models/initial models/big && chmod -R u+w models/big
for i in $(seq 1 400); do truncate -s 60M "models/big/shard-$i.safetensors"; done
left=$(( VTBENCH_DEADLINE - $(date +%s) - 3 ))
if [ "$left" -gt 0 ]; then sleep "$left"; fi
echo submitting
vtbench submit --model models/big
"""


def mount_roots(mountinfo: str) -> list[tuple[str, str, str]]:
    """(root within its filesystem, mount point, mount source) of every mount."""
    found = []
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        found.append((parts[3], parts[4], rest.split()[1]))
    return found


def test_the_agent_sees_no_host_path_of_the_store_or_its_episode(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, path = run_episode(RunOptions(task=str(prepared_arith), agent=f"command:{PROBE}",
                                          out=tmp_path, budget_minutes=2))
    folder, workspace = path.parent, path.parent / "workspace"
    assert record.status == "finished"

    outputs = (workspace / "fds.txt").read_text().split()
    assert len(outputs) == 2 and all(o.startswith("pipe:[") for o in outputs), outputs
    private = [str(layout.home()), str(folder.resolve()), str(tmp_path.resolve())]
    home = str(Path.home().resolve())
    mounts = mount_roots((workspace / "mountinfo.txt").read_text())
    assert any(point == "/run/vtbench/grader.sock" for _, point, _ in mounts)
    for root, point, source in mounts:
        assert not any(p in root or p in source for p in private), (root, point)
        # the Python runtime is mounted at its own path: the agent runs it from there
        assert not root.startswith(home + os.sep) or root == point, (root, point)
    assert "agent says hello" in (folder / "agent.log").read_text()
    assert '"seconds_left"' in (workspace / "status.json").read_text()  # the grader answers


@pytest.mark.slow  # the agent waits for its deadline
def test_a_submission_whose_intake_outlives_the_episode_is_refused_and_the_episode_ends(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, path = run_episode(RunOptions(task=str(prepared_arith), agent=f"command:{LATE}",
                                          out=tmp_path, budget_minutes=0.75))
    paths = EpisodePaths(path.parent)
    assert "submitting" in paths.agent_log.read_text()
    assert record.status == "finished" and record.stop_reason == "deadline"
    assert not record.submitted and record.submission is None
    assert record.final_test == record.initial_test and record.gain == 0.0

    episode = json.loads(paths.runner_state.read_text())["episode"]
    ledger = Ledger()
    assert ledger.submission(episode) is None and ledger.episode(episode).status == "closed"
    refusals = [e["detail"]["error"] for e in ledger.events(episode)
                if e["kind"] == "candidate_refused"]
    assert len(refusals) == 1 and "episode closed" in refusals[0], refusals
    assert not os.path.ismount(paths.workspace) and paths.workspace.is_dir()
    assert not paths.workspace.with_name("workspace.img").exists()
    assert not list(layout.candidate_store().glob(".incoming-*"))
