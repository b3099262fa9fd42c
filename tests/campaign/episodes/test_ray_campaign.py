"""The Ray executor on a real two-node Ray cluster (head and worker on the loopback, in a
network and pid namespace of their own, so nothing can leave the machine and every Ray
process ends with the namespace): the campaign's episodes end in the same states as on the
local executor, one on each node, and their folders are gathered whole."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.campaign.episodes.conftest import campaign_file, rows, shape, vtbench
from vtbench import layout
from vtbench.campaign.attempt import record_of

pytest.importorskip("ray")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                       reason="a network namespace of its own needs root and unshare"),
]
PORT = 6391
CLUSTER = """
set -e
ip link set lo up
mkdir -p "$HOME"
echo '{{}}' > "$HOME/ray_bootstrap_config.yaml"
node="--node-ip-address 127.0.0.1 --num-cpus 1 --memory 6000000000 \
      --object-store-memory 100000000 --disable-usage-stats"
{ray} start --head --port {port} --include-dashboard false --temp-dir {tmp}/head $node >/dev/null
{ray} start --address 127.0.0.1:{port} --temp-dir {tmp}/worker $node >/dev/null
set +e
{python} -m vtbench campaign run {file} --out {out} --executor ray --address 127.0.0.1:{port}
echo "campaign exit $?"
"""


def run_on_two_node_cluster(file: Path, out: Path) -> str:
    # Ray's socket paths under its temp folder must stay under 108 bytes: a short folder
    with tempfile.TemporaryDirectory(prefix="vtray-", dir="/tmp") as tmp:
        script = CLUSTER.format(ray=f"{sys.executable} -m ray.scripts.scripts", port=PORT,
                                tmp=tmp, python=sys.executable, file=file, out=out)
        env = {**os.environ, "HOME": f"{tmp}/home", "RAY_USAGE_STATS_ENABLED": "0",
               "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/"}
        done = subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount-proc", "bash",
                               "-c", script], capture_output=True, text=True, env=env,
                              timeout=1200)
    return done.stdout + done.stderr


def test_a_campaign_on_a_two_node_ray_cluster_ends_as_on_the_local_executor(
        prepared_arith: Path, tmp_path: Path) -> None:
    # No grader of the test's own: the episodes' workspaces are mounted in the cluster's
    # mount namespace, so the grader the nodes share must start there (as it does).
    file = campaign_file(tmp_path, prepared_arith, seeds="[0]")
    local = vtbench("campaign", "run", str(file), "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr[-2000:]

    output = run_on_two_node_cluster(file, tmp_path / "ray")
    assert "campaign exit 0" in output, output[-3000:]
    on_ray, on_host = rows(tmp_path / "ray"), rows(tmp_path / "local")
    assert shape(on_ray) == shape(on_host)
    assert len({row.node for row in on_ray.values()}) == 2, on_ray
    for row in on_ray.values():
        assert row.folder is not None
        folder = tmp_path / "ray" / row.folder
        record = record_of(folder)
        assert record is not None and record.status == "finished"
        log = subprocess.run(["git", "--git-dir", str(folder / "snapshots.git"), "log",
                              "--oneline"], capture_output=True, text=True, check=True)
        assert log.stdout.strip(), "the gathered episode lost its snapshots"
        assert (folder / "workspace" / "TASK.md").is_file()
    report = vtbench("campaign", "report", str(tmp_path / "ray"), "--json")
    assert report.returncode == 0 and '"agent": "noop"' in report.stdout, report.stderr


def grader_starts() -> int:
    """Graders started so far in this module's private store (each logs where it evaluates)."""
    log = layout.grader_home() / "grader.log"
    return log.read_text().count("evaluating on") if log.exists() else 0


def test_a_node_keeps_its_grader_for_the_whole_campaign(prepared_arith: Path,
                                                        tmp_path: Path) -> None:
    # one episode at a time: a grader started per episode would start three times
    file = tmp_path / "campaign.toml"
    file.write_text(f'agents = [{{name = "command:true", label = "quitter"}}]\n'
                    f'tasks = ["{prepared_arith}"]\nseeds = [0, 1, 2]\nconcurrency = 1\n')
    before = grader_starts()
    output = run_on_two_node_cluster(file, tmp_path / "ray")
    assert "campaign exit 0" in output, output[-3000:]
    assert {row.state for row in rows(tmp_path / "ray").values()} == {"failed_agent"}
    assert grader_starts() - before == 1
    assert not (layout.grader_home() / "runner-grader.pid").exists(), "the grader outlived it"


OVERSUBSCRIBED = """
set -e
ip link set lo up
mkdir -p "$HOME"
echo '{{}}' > "$HOME/ray_bootstrap_config.yaml"
{ray} start --head --port {port} --include-dashboard false --temp-dir {tmp}/head \
    --node-ip-address 127.0.0.1 --num-cpus {cpus} --memory 6000000000 \
    --object-store-memory 100000000 --disable-usage-stats >/dev/null
set +e
{python} -m vtbench campaign run {file} --out {out} --executor ray --address 127.0.0.1:{port}
echo "campaign exit $?"
"""


def test_a_ray_node_that_offers_more_cpus_than_it_has_cores_is_refused_before_anything_runs(
        tmp_path: Path) -> None:
    from vtbench.reservation import host_cores

    file = campaign_file(tmp_path, layout.BUILTIN_TASKS / "arith", seeds="[0]")
    cores = len(host_cores())
    with tempfile.TemporaryDirectory(prefix="vtray-", dir="/tmp") as tmp:
        script = OVERSUBSCRIBED.format(ray=f"{sys.executable} -m ray.scripts.scripts",
                                       port=PORT, tmp=tmp, cpus=2 * cores,
                                       python=sys.executable, file=file, out=tmp_path / "out")
        env = {**os.environ, "HOME": f"{tmp}/home", "RAY_USAGE_STATS_ENABLED": "0",
               "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/"}
        done = subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount-proc", "bash",
                               "-c", script], capture_output=True, text=True, env=env,
                              timeout=600)
    output = done.stdout + done.stderr
    assert "campaign exit 2" in output, output[-3000:]
    assert f"offers {2 * cores} CPUs but has {cores} cores" in output, output[-3000:]
    assert f"ray start --num-cpus {cores}" in output
    assert not (tmp_path / "out").exists()
