"""The agent's ``vtbench validate|submit`` in a real subprocess against the real grader."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.evaluation.conftest import tiny_model, write_harness  # noqa: F401
from tests.grader.conftest import GraderProcess, grader, small_task, workspace  # noqa: F401


def agent_cli(grader: GraderProcess, token: str, workspace: Path,  # noqa: F811
              *args: str) -> dict:
    env = {**os.environ, "VTBENCH_GRADER_SOCKET": str(grader.socket), "VTBENCH_TOKEN": token}
    done = subprocess.run([sys.executable, "-m", "vtbench", *args, "--json"], cwd=workspace,
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_validate_and_submit_use_the_workspace_harness_by_default(
    grader: GraderProcess, small_task: Path, workspace: Path  # noqa: F811
) -> None:
    write_harness(workspace / "harness", "answer(['upper'] * len(instances))\n")
    grader.start()
    token = grader.create_episode(small_task, workspace)

    result = agent_cli(grader, token, workspace, "validate", "--model", "models/good")
    assert result["state"] == "completed" and result["harness"] == "candidate"
    assert [i["output"] for i in result["instances"]] == ["upper"] * result["n"]

    ack = agent_cli(grader, token, workspace, "submit", "--model", "models/good")
    history = grader.operator_client().get(
        f"/v1/operator/episodes/{ack['episode']}/history").json()
    assert history["validations"][0]["harness_hash"] != "pristine"
    assert ack["harness_hash"] == history["validations"][0]["harness_hash"]
