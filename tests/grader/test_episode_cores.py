"""The grader evaluates an episode's candidates on the cores its spec reserved: a candidate
harness reads its own ``Cpus_allowed_list`` inside the real harness sandbox of a real
validation, and a grader started afresh on the same ledger finds the cores again."""

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.evaluation.conftest import write_harness
from tests.grader.conftest import mark_prepared
from vtbench.grader.core import Grader
from vtbench.grader.ledger import Ledger
from vtbench.spec import AgentChoice, EpisodeSpec, Reservation
from vtbench.tasks import find_task

CORE = max(os.sched_getaffinity(0))
REPORT_CORES = (
    "line = [l for l in open('/proc/self/status') if l.startswith('Cpus_allowed_list')][0]\n"
    "answer([line.split()[1]] * len(instances))\n")


def test_a_validation_runs_its_harness_on_the_episodes_reserved_core(
        small_task: Path, workspace: Path, tmp_path: Path) -> None:
    task, digest = mark_prepared(small_task)
    spec = EpisodeSpec.decide(task, digest, find_task(str(small_task)).spec,
                              AgentChoice(name="reference"), 0,
                              reservation=Reservation(cores=[CORE]))
    write_harness(workspace / "harness", REPORT_CORES)
    ledger_path = tmp_path / "ledger.sqlite"
    grader = Grader(ledger=Ledger(ledger_path))
    grader.start()
    try:
        grant = grader.create_episode(task, digest, workspace, spec=spec)
        episode = grader.authenticate(grant.token)
        queued = grader.validate(episode, "models/good", "harness")
        deadline = time.monotonic() + 300
        while (done := grader.validation(episode, queued.id)).state in ("queued", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        grader.stop()
    assert done.state == "completed", done
    assert {instance["output"] for instance in done.instances} == {str(CORE)}
    again = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom pathlib import Path\n"
         "from vtbench.grader.ledger import Ledger\n"
         "from vtbench.grader.pipeline import episode_cores\n"
         "print(episode_cores(Ledger(Path(sys.argv[1])), sys.argv[2]))", str(ledger_path),
         episode.id], capture_output=True, text=True, check=True)
    assert again.stdout.strip() == f"[{CORE}]"
