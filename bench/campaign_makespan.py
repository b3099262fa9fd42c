"""A campaign's makespan ÷ (sum of its episodes' wall seconds ÷ concurrency), and the seconds
the Ray executor adds to each episode over the local one.

A campaign of N noop episodes (seeds 0..N-1) on one prepared task runs on the local
executor at concurrency C. The ratio is 1.0 when C episodes run at every moment and nothing
happens between them; what it exceeds 1.0 by is the campaign's own cost (its start, the
checks, the grader it holds, starting each runner) and the tail where fewer than C run.
With ``--ray`` the same campaign runs again on a two-node Ray cluster (head and worker on
the loopback, in a network and pid namespace of its own: needs root and ``unshare``), one
CPU per node, and the mean episode wall time of the two runs is compared: the difference
is Ray's cost per episode (scheduling, the episode folder's trip back as a tar archive).

Usage: python bench/campaign_makespan.py --task PATH_OR_ID [--episodes 6] [--concurrency 2]
       [--ray]
The task must be prepared already (``vtbench prepare``): this measures campaigns only. A
one-episode campaign runs first and is not measured: a task's first episode in a private
store reads the whole runtime for the leak audit, once.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vtbench.campaign import CampaignFolder, EpisodeState, Ledger

CAMPAIGN = """
agents = [{{name = "noop"}}]
tasks = ["{task}"]
seeds = {seeds}
concurrency = {concurrency}
retries = 0
[budget]
budget_minutes = 5
"""
CLUSTER = """
set -e
ip link set lo up
mkdir -p "$HOME"
echo '{{}}' > "$HOME/ray_bootstrap_config.yaml"
node="--node-ip-address 127.0.0.1 --num-cpus 1 --memory 6000000000 \
      --object-store-memory 100000000 --disable-usage-stats"
{ray} start --head --port 6392 --include-dashboard false --temp-dir {tmp}/head $node >/dev/null
{ray} start --address 127.0.0.1:6392 --temp-dir {tmp}/worker $node >/dev/null
{python} -m vtbench campaign run {file} --out {out} --executor ray --address 127.0.0.1:6392
"""


def episodes(out: Path) -> list[EpisodeState]:
    ledger = Ledger(CampaignFolder(out).ledger)
    try:
        found = ledger.rows()
    finally:
        ledger.close()
    failed = [row for row in found if row.state != "finished"]
    if failed:
        raise SystemExit(f"{len(failed)} episodes did not finish: {failed[0].reason}")
    return found


def run_local(file: Path, out: Path) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "vtbench", "campaign", "run", str(file), "--out",
                    str(out)], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def run_ray(file: Path, out: Path, tmp: Path) -> None:
    script = CLUSTER.format(ray=f"{sys.executable} -m ray.scripts.scripts", tmp=tmp,
                            python=sys.executable, file=file, out=out)
    env = {**os.environ, "HOME": str(tmp / "home"), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/"}
    subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount-proc", "bash", "-c", script],
                   check=True, env=env, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--ray", action="store_true")
    args = parser.parse_args()
    task = Path(args.task).resolve() if Path(args.task).exists() else args.task
    with tempfile.TemporaryDirectory(prefix="campaign-makespan-") as scratch:
        tmp = Path(scratch)
        warmup = tmp / "warmup.toml"  # a task's first episode audits the runtime (cached)
        warmup.write_text(CAMPAIGN.format(task=task, seeds=[0], concurrency=1))
        run_local(warmup, tmp / "warmup")
        file = tmp / "campaign.toml"
        file.write_text(CAMPAIGN.format(task=task, seeds=list(range(args.episodes)),
                                        concurrency=args.concurrency))
        makespan = run_local(file, tmp / "local")
        local = [row.seconds or 0.0 for row in episodes(tmp / "local")]
        ideal = sum(local) / args.concurrency
        print(f"local: {args.episodes} noop episodes at concurrency {args.concurrency}: "
              f"makespan {makespan:.1f} s, episodes {statistics.fmean(local):.1f} s each "
              f"(sum {sum(local):.1f} s); makespan / (sum / concurrency) = "
              f"{makespan / ideal:.2f}")
        if args.ray:
            with tempfile.TemporaryDirectory(prefix="vtray-", dir="/tmp") as short:
                run_ray(file, tmp / "ray", Path(short))  # Ray's socket paths stay short
            on_ray = [row.seconds or 0.0 for row in episodes(tmp / "ray")]
            print(f"ray: episodes {statistics.fmean(on_ray):.1f} s each; added per episode "
                  f"over local: {statistics.fmean(on_ray) - statistics.fmean(local):+.1f} s")


if __name__ == "__main__":
    main()
