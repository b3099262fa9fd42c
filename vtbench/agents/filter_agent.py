"""The filter baseline: it changes the data (D) only, and trains with the trainer as it is.

1. validate the initial model (the data as shipped, put back first when an interrupted
   episode runs the agent again: :func:`vtbench.agents.scripted.start_from_shipped`);
2. clean the training data (every ``data/*.jsonl``, taken together, :func:`filter_data`):
   drop malformed rows (not JSON, not an object, no string ``prompt`` or ``completion``);
   where the task has a row check (:mod:`vtbench.agents.row_checks`: the tiny tasks),
   rewrite rows written in another format into the harness's prompt format, keeping their
   content, and drop rows in a format it does not know and rows whose label does not check
   out against their input; then drop repeats of a (prompt, completion) pair and every
   row of a prompt that appears with different completions;
3. train ``models/filtered`` with the unchanged trainer and config, validate it;
4. submit the better of the two; when that is the initial model, the data is put back as
   it was first, so the submission's snapshot is the initial system's (the shared
   watchdog submits the best so far when the deadline is near; a failed training leaves
   the initial model to submit).

It never makes a label or a row: every row it keeps is a row of the data, verbatim, or
that row rewritten in the harness's format with the same content. Files other than
``*.jsonl`` are not touched. Runs inside the research sandbox
(``python -m vtbench.agents.filter_agent``).
"""

import argparse
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vtbench.agents.row_checks import Pair, RowCheck, row_check
from vtbench.agents.scripted import (
    WORKSPACE,
    BestSoFar,
    Say,
    TrainingFailed,
    put_back_shipped,
    speaker,
    start_from_shipped,
)
from vtbench.client import GraderClient

say = speaker("filter")


@dataclass
class FilterCounts:
    kept: int = 0
    rewritten: int = 0
    """Kept rows rewritten into the harness's format (their content unchanged)."""
    malformed: int = 0
    off_format: int = 0
    """Rows in a format the task's check does not know."""
    mislabelled: int = 0
    """Rows whose label does not check out against their input (or cannot be checked)."""
    duplicates: int = 0
    contradicting: int = 0
    """Rows dropped because their prompt appears with different completions."""

    @property
    def dropped(self) -> int:
        return (self.malformed + self.off_format + self.mislabelled + self.duplicates
                + self.contradicting)

    def __str__(self) -> str:
        return (f"kept {self.kept} rows ({self.rewritten} rewritten into the harness's "
                f"format); dropped {self.malformed} malformed, {self.off_format} in an "
                f"unknown format, {self.mislabelled} whose label does not check out, "
                f"{self.duplicates} duplicates, {self.contradicting} with contradicting "
                "completions")


def parse(line: str) -> dict | None:
    """A well-formed row (an object with string ``prompt`` and ``completion``), else None."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if isinstance(row, dict) and isinstance(row.get("prompt"), str) \
            and isinstance(row.get("completion"), str):
        return row
    return None


def checked(rows: list[dict | None], check: RowCheck | None,
            counts: FilterCounts) -> list[Pair | None]:
    """Each row's (prompt, completion) in the harness's format when it passes the task's
    check, else None."""
    pairs: list[Pair | None] = [(r["prompt"], r["completion"]) if r else None for r in rows]
    if check is None:
        return pairs
    normalised = [check.normalise(pair) if pair else None for pair in pairs]
    counts.off_format += sum(1 for p, n in zip(pairs, normalised, strict=True) if p and not n)
    candidates = [pair for pair in normalised if pair]
    verdicts = iter(check.consistent(candidates))
    passing = [pair if pair and next(verdicts) else None for pair in normalised]
    counts.mislabelled += sum(1 for n, p in zip(normalised, passing, strict=True) if n and not p)
    return passing


def filter_rows(lines: Sequence[str], counts: FilterCounts,
                check: RowCheck | None = None) -> list[str | None]:
    """What to write for each of ``lines``: the line itself, the row rewritten into the
    harness's format, or None to drop it (blank lines are not rows: they go)."""
    rows = [parse(line) if line.strip() else None for line in lines]
    counts.malformed += sum(1 for line, row in zip(lines, rows, strict=True)
                            if row is None and line.strip())
    pairs = checked(rows, check, counts)
    completions: dict[str, set[str]] = defaultdict(set)
    for pair in pairs:
        if pair is not None:
            completions[pair[0]].add(pair[1])
    seen: set[Pair] = set()
    written: list[str | None] = []
    for line, row, pair in zip(lines, rows, pairs, strict=True):
        if pair is not None and len(completions[pair[0]]) > 1:
            counts.contradicting += 1
        elif pair is not None and pair in seen:
            counts.duplicates += 1
        elif pair is not None and row is not None:
            seen.add(pair)
            written.append(rewritten(line, row, pair, counts))
            continue
        written.append(None)
    counts.kept = sum(1 for line in written if line is not None)
    return written


def rewritten(line: str, row: dict, pair: Pair, counts: FilterCounts) -> str:
    """The line verbatim when the check left its row as it was, else the row rewritten."""
    if pair == (row["prompt"], row["completion"]):
        return line
    counts.rewritten += 1
    return json.dumps({**row, "prompt": pair[0], "completion": pair[1]})


def filter_data(data: Path, check: RowCheck | None = None) -> FilterCounts:
    """Rewrite every ``*.jsonl`` of ``data`` with only the rows that pass, together."""
    files = sorted(data.glob("*.jsonl"))
    lines = {path: path.read_text().splitlines() for path in files}
    everything = [line for path in files for line in lines[path]]
    counts = FilterCounts()
    written = iter(filter_rows(everything, counts, check))
    for path in files:
        kept = [line for line in (next(written) for _ in lines[path]) if line is not None]
        path.write_text("".join(line + "\n" for line in kept))
    return counts


def clean_workspace_data(client: GraderClient, workspace: Path, tell: Say) -> FilterCounts:
    """Filter ``data/`` with the check of the episode's task; returns the counts."""
    task = client.status().task
    check = row_check(workspace)
    counts = filter_data(workspace / "data", check)
    tell(f"{task}: {'checked rows against their inputs' if check else 'no row check'}; "
         f"{counts}")
    return counts


def run(client: GraderClient, seed: int, workspace: Path = WORKSPACE) -> None:
    board = BestSoFar(client, say, workspace)
    board.watch_the_clock()
    start_from_shipped(workspace)
    board.validate("models/initial")
    counts = clean_workspace_data(client, workspace, say)
    if counts.dropped or counts.rewritten:
        try:
            board.validate(board.train("filtered", seed))
        except TrainingFailed as err:
            say(str(err))
    if board.best()[1] == "models/initial":
        put_back_shipped(workspace)
    board.submit_best("done")


def main() -> None:
    parser = argparse.ArgumentParser(description="built-in filter agent (data only)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run(GraderClient.from_environment(), args.seed)


if __name__ == "__main__":
    main()
