"""The filter baseline: it changes the data (D) only, and trains with the trainer as it is.

1. validate the initial model;
2. clean the training data (every ``data/*.jsonl``, taken together): drop malformed rows
   (not JSON, not an object, no string ``prompt`` or ``completion``), repeats of a
   (prompt, completion) pair, and every row of a prompt that appears with different
   completions (its labels contradict each other);
3. train ``models/filtered`` with the unchanged trainer and config, validate it;
4. submit the better of the two (the shared watchdog submits the best so far when the
   deadline is near; a failed training leaves the initial model to submit).

Rows that stay keep their exact text and order; files other than ``*.jsonl`` are not
touched. Runs inside the research sandbox (``python -m vtbench.agents.filter_agent``).
"""

import argparse
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vtbench.agents.scripted import WORKSPACE, BestSoFar, TrainingFailed, speaker, train
from vtbench.client import GraderClient

say = speaker("filter")


@dataclass
class FilterCounts:
    kept: int = 0
    malformed: int = 0
    duplicates: int = 0
    inconsistent: int = 0
    """Rows dropped because their prompt appears with different completions."""

    @property
    def dropped(self) -> int:
        return self.malformed + self.duplicates + self.inconsistent


def parse(line: str) -> tuple[str, str] | None:
    """(prompt, completion) of a well-formed row, else None."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict):
        return None
    prompt, completion = row.get("prompt"), row.get("completion")
    if isinstance(prompt, str) and isinstance(completion, str):
        return prompt, completion
    return None


def filter_rows(lines: Sequence[str], counts: FilterCounts) -> list[bool]:
    """Which of ``lines`` to keep (blank lines are not rows: they go)."""
    pairs = [parse(line) if line.strip() else None for line in lines]
    counts.malformed += sum(1 for line, pair in zip(lines, pairs, strict=True)
                            if pair is None and line.strip())
    completions: dict[str, set[str]] = defaultdict(set)
    for pair in pairs:
        if pair is not None:
            completions[pair[0]].add(pair[1])
    seen: set[tuple[str, str]] = set()
    keep = []
    for pair in pairs:
        if pair is not None and len(completions[pair[0]]) > 1:
            counts.inconsistent += 1
        elif pair is not None and pair in seen:
            counts.duplicates += 1
        elif pair is not None:
            seen.add(pair)
            keep.append(True)
            continue
        keep.append(False)
    counts.kept = sum(keep)
    return keep


def filter_data(data: Path) -> FilterCounts:
    """Rewrite every ``*.jsonl`` of ``data`` with only the rows that pass, together."""
    files = sorted(data.glob("*.jsonl"))
    lines = {path: path.read_text().splitlines() for path in files}
    everything = [line for path in files for line in lines[path]]
    counts = FilterCounts()
    keep = iter(filter_rows(everything, counts))
    for path in files:
        kept = [line for line in lines[path] if next(keep)]
        path.write_text("".join(line + "\n" for line in kept))
    return counts


def run(client: GraderClient, seed: int, workspace: Path = WORKSPACE) -> None:
    board = BestSoFar(client, say)
    board.watch_the_clock()
    board.validate("models/initial")
    counts = filter_data(workspace / "data")
    say(f"kept {counts.kept} rows; dropped {counts.malformed} malformed, {counts.duplicates} "
        f"duplicates, {counts.inconsistent} with contradicting completions")
    if counts.dropped:
        try:
            board.validate(train("filtered", seed, say, workspace))
        except TrainingFailed as err:
            say(str(err))
    board.submit_best("done")


def main() -> None:
    parser = argparse.ArgumentParser(description="built-in filter agent (data only)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run(GraderClient.from_environment(), args.seed)


if __name__ == "__main__":
    main()
