"""Write repofix's training data: agent trajectories scripted on the training libraries.

Usage: python tasks/repofix/make_data.py [LIBRARY ...]   (writes public/data/train.jsonl,
the initial data, and reference_data/train.jsonl, the reference's; from the named training
libraries, all of them by default)

Each instance of a training library becomes one scripted trajectory in the harness's
transcript format (``public/harness/transcript.py``): find the function, view it with line
numbers, edit it back to the original, run its test file, submit. Every action is one row:
the transcript before it is the prompt, the action the completion. The reference rows do
it right, with observations cut as the reference harness cuts them. The initial rows were
made in a hurry: a third of the edits leave the bug in place or replace the wrong lines,
a fifth of the rows are repeated, and nothing cuts the observations (a long transcript
outgrows the trainer's context).
"""

import json
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "public" / "harness"))
import transcript  # noqa: E402

from vtbench.tasks.registry import import_file  # noqa: E402

BUILDER = import_file(HERE / "builder.py", "repofix_make_data_builder")
trees = BUILDER._module("trees")
REFERENCE = {"issue_chars": 3000, "observation_chars": 1500, "wrong": 0.0, "repeated": 0.0}
INITIAL = {"issue_chars": 6000, "observation_chars": 20000, "wrong": 0.33, "repeated": 0.2}


def the_edit(label: dict, start: int, end: int, wrong: bool, rng: random.Random) -> str:
    text = label["function_source"]
    if wrong:
        if rng.random() < 0.5:
            text = text.replace(label["removed"], label["replacement"], 1)
        else:
            end = max(start, end - 1)
    return f"edit {label['path']} {start} {end}\n{text.rstrip(chr(10))}\nend_edit"


def trajectory(label: dict, settings: dict, rng: random.Random) -> list[dict]:
    start, end = trees.buggy_function_lines(label)
    name = label["function"].split(".")[-1]
    test_file = label["failing"][0].split("::")[0]
    actions = [f'$ grep -n "def {name}" {label["path"]}',
               f"$ nl -ba {label['path']} | sed -n '{max(1, start - 2)},{end + 2}p'",
               the_edit(label, start, end, rng.random() < settings["wrong"], rng),
               f"$ python -m pytest -q -o addopts= {test_file}", "submit"]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = trees.harness_tree(label, Path(scratch) / "tree")
        text = transcript.start(label["issue"], label["release"], settings["issue_chars"])
        for action in actions:
            rows.append({"prompt": text, "completion": action})
            if action.startswith("$ "):
                observation = transcript.run_shell(action[2:], folder, 60,
                                                   settings["observation_chars"])
            elif action.startswith("edit "):
                observation = transcript.edit(folder, action)
            else:
                break
            text = transcript.add_turn(text, action, observation)
    return rows


def rows_for(settings: dict, seed: int, names: list[str]) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for label in BUILDER.pool("training", names or None):
        rows += trajectory(label, settings, rng)
    rows += [row for row in rows if rng.random() < settings["repeated"]]
    rng.shuffle(rows)
    return rows


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


if __name__ == "__main__":
    chosen = sys.argv[1:]
    write(HERE / "public" / "data" / "train.jsonl", rows_for(INITIAL, 0, chosen))
    write(HERE / "reference_data" / "train.jsonl", rows_for(REFERENCE, 1, chosen))
