"""shell scorer (trusted): 1.0 when the candidate command does what the gold command does.

The gold and the candidate each run in a fresh bubblewrap sandbox over a fresh copy of the
item's file-system image (``filesystem.run``: no network, the unprivileged sandbox uid,
bounded wall clock, CPU, processes, memory, file size and output; nothing of the host
writable but the scratch copy). They agree by ``filesystem.agrees``: where the gold changes
the file system, the candidate must leave the same one; else it must leave it unchanged
and print the same lines, in any order. A candidate that runs out of time, is killed by a
limit, prints more than the output limit or fills the tree beyond what the state reader
reads scores 0. Gold and candidate run side by side; a gold's outcome is kept for
later scorings of the same item in the process. The output is the command itself: what
the harness wrote, run as one bash script (prose around a command fails as bash would).

Where bubblewrap cannot run, the sandbox raises (one line naming the fix) instead of
running the command anywhere else, and the grader refunds the evaluation as its own
failure.
"""

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

from vtbench.tasks.registry import import_file

filesystem = import_file(Path(__file__).parent / "filesystem.py", "shell_filesystem")


@lru_cache(maxsize=1024)
def _gold(image_text: str, gold: str) -> tuple:
    """The gold's outcome and the image's own state: the same at every scoring of an item,
    so a grader that scores one validation split many times runs each gold once."""
    image = filesystem.decode(image_text)
    return filesystem.run(image, gold), filesystem.initial_state(image)


def score(item: dict, output: str) -> float:
    command = output.strip()
    if not command or "\0" in command:
        return 0.0
    image_text = item["input"]["image"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        gold = pool.submit(_gold, image_text, item["label"]["gold"])
        candidate = filesystem.run(filesystem.decode(image_text), command)
        gold_outcome, initial = gold.result()
    return 1.0 if filesystem.agrees(gold_outcome, candidate, initial) else 0.0
