"""How long `vtbench report` takes over 1,000 synthetic episodes (goal: ≤ 10 s on 2 cores).

Every episode is a real EpisodeRecord with a real workspace git repository of 2–9 commits
(real edits of data/, trainer/, harness/; see vtbench.analysis.synthetic): 4 agents × 5
tasks × 50 seeds. Four timings of the real CLI (a fresh interpreter each, writing the
HTML report and printing --json):

  cold    histories classified from git (one `git cat-file --batch` per episode)
  stored  histories read from changes.json, as written by write_history at finalisation
  records a copy of the records alone, without workspaces (no histories at all)
  packed  cold again after `git gc` packed every repository (objects come from one
          `git cat-file --batch` process per episode instead of loose files)

The baseline, measured in the same run, is reading and validating the 1,000 records
without any analysis: the ratio says what the analysis and rendering cost on top.

    nice -n 10 .venv/bin/python bench/report_scale.py [--episodes 1000] [--keep DIR]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vtbench.analysis.history import write_history
from vtbench.analysis.loading import find_episode_folders, load_record
from vtbench.analysis.synthetic import make_episodes

AGENTS = ["reference", "noop", "claude-code", "codex"]
TASKS = ["arith", "textfix", "sort", "humaneval", "units"]


def run_report(root: Path, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "vtbench", "report", str(root), "--html", str(out),
                    "--json"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def baseline(root: Path) -> float:
    start = time.perf_counter()
    for folder in find_episode_folders([root]):
        load_record(folder)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="build the episodes here and keep them")
    args = parser.parse_args()
    seeds = range(max(1, args.episodes // (len(AGENTS) * len(TASKS))))
    work = args.keep or Path(tempfile.mkdtemp(prefix="vtbench-report-bench-"))
    root, bare = work / "runs", work / "records-only"
    start = time.perf_counter()
    folders = make_episodes(root, AGENTS, TASKS, list(seeds), harness_tasks=TASKS[:2])
    print(f"built {len(folders)} episodes with git histories in "
          f"{time.perf_counter() - start:.1f} s")
    for folder in folders:
        (bare / folder.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / "episode.json", bare / folder.name / "episode.json")
    base = baseline(root)
    cold = run_report(root, work / "cold.html")
    for folder in folders:
        write_history(load_record(folder), folder)
    stored = run_report(root, work / "stored.html")
    records = run_report(bare, work / "records.html")
    for folder in folders:
        (folder / "changes.json").unlink()
        subprocess.run(["git", "-C", str(folder / "workspace"), "gc", "--quiet", "--prune=now"],
                       check=True)
    packed = run_report(root, work / "packed.html")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"baseline (read + validate {len(folders)} records): {base:.2f} s")
    for name, seconds in (("cold (classify from git)", cold),
                          ("stored (changes.json)", stored), ("records only", records),
                          ("cold, packed repositories", packed)):
        print(f"vtbench report, {name}: {seconds:.2f} s = {seconds / base:.1f}x baseline, "
              f"{seconds / 10:.2f} of the 10 s goal")
    if args.keep is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
