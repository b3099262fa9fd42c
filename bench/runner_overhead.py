"""Runner overhead: time from ``vtbench run`` to the agent's start, and the runner's share.

Runs one ``noop`` episode on a prepared task and splits its wall time by the runner's own
event timestamps: set-up (workspace, leak audit, grader, sandbox start), the agent, and
finalisation (the grader's test scoring). The runner's share is everything that is
neither the agent nor grading. Prints seconds and shares; the task must be prepared.

    python bench/runner_overhead.py --task arith
"""

import argparse
import tempfile
import time
from pathlib import Path

from vtbench.episode.runner import RunOptions, run_episode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="arith")
    args = parser.parse_args()
    stamps: dict[str, float] = {}

    def event(line: str) -> None:
        for key in ("leak audit", "started", "agent stopped"):
            if key in line:
                stamps.setdefault(key, time.perf_counter())

    with tempfile.TemporaryDirectory() as out:
        begun = time.perf_counter()
        record, _ = run_episode(RunOptions(task=args.task, agent="noop", out=Path(out)),
                                events=event)
        ended = time.perf_counter()
    total = ended - begun
    to_agent = stamps["started"] - begun
    agent = stamps["agent stopped"] - stamps["started"]
    grading = ended - stamps["agent stopped"]
    audit = stamps["started"] - stamps["leak audit"]
    print(f"episode wall time:          {total:.1f} s (noop, {record.task})")
    print(f"run -> agent started:       {to_agent:.1f} s (of which leak audit {audit:.1f} s)")
    print(f"agent (submit, then stop):  {agent:.1f} s")
    print(f"finalisation (test score):  {grading:.1f} s")
    print(f"runner share of a 15-minute episode: {to_agent / (15 * 60):.1%} (goal <= 2%)")


if __name__ == "__main__":
    main()
