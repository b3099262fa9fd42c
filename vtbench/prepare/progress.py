"""Preparation progress for a log file or pipe, where a live display cannot be."""

import re
from collections.abc import Callable


def log_reporter(write: Callable[[str], None]) -> Callable[[str, str], None]:
    """Progress for a log file or pipe: each job's lines as ``job: line``, but of the
    training steps only the first, every hundredth and the last, and no line repeating the
    one before it (an evaluation reports its count until it moves)."""
    last: dict[str, str] = {}

    def report(job: str, line: str) -> None:
        step = re.match(r"step (\d+)/(\d+)", line)
        if step and (int(step[1]) - 1) % 100 and step[1] != step[2]:
            return
        if last.get(job) != line:
            last[job] = line
            write(f"{job}: {line}")

    return report
