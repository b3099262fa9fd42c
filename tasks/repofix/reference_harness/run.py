"""repofix reference harness: localise, reproduce, sample several edits, keep one that works.

Protocol: as the initial harness (see its docstring in git history or ``agent.py``):
python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl; one diff per instance.

Per instance: the function to fix comes from the issue's traceback (``localise.py``), and
the failing test, read back from the issue, is added to its test file as a reproduction.
The transcript then shows two scripted turns (find the function, view it with line
numbers; observations cut to ``observation_chars``) and asks the model for the edit:
``samples`` sampled edits and a greedy one. Each edit is tried on the tree; the first that
makes the reproduction and the rest of its test file pass is kept, else the greedy one.
The reproduction is removed before the diff is taken.
"""

import argparse
import json
import shutil
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import localise
import transcript
from client import complete

HERE = Path(__file__).parent


def scripted(issue: str, repository: str, folder: Path, settings: dict) -> tuple[str, list]:
    text = transcript.start(issue, repository, settings["issue_chars"])
    found = localise.locate(issue, folder)
    if found is None:
        return text, []
    path, (name, start, end) = found
    steps = []
    for action in (f'$ grep -n "def {name}" {path}', f"$ nl -ba {path} | sed -n '{start},{end}p'"):
        observation = transcript.run_shell(action[2:], folder, settings["command_seconds"],
                                           settings["observation_chars"])
        steps.append({"action": action, "observation": observation})
        text = transcript.add_turn(text, action, observation)
    return text, steps


def candidates(text: str, base_url: str, settings: dict) -> list[str]:
    greedy = complete(base_url, text, settings["decoding"], stop=transcript.STOP)
    sampled = complete(base_url, text, settings["sampling"], stop=transcript.STOP,
                       n=settings["samples"]) if settings["samples"] else {"texts": []}
    actions = [transcript.first_action(t) for t in [*greedy["texts"], *sampled["texts"]]]
    return list(dict.fromkeys(a for a in actions if a.startswith("edit ")))


def try_edit(folder: Path, action: str, tests: list[str] | None, seconds: float) -> bool:
    if tests is None:
        return False
    backup = folder.parent / (folder.name + ".backup")
    shutil.copytree(folder, backup)
    transcript.edit(folder, action)
    works = localise.passes(folder, tests, seconds)
    shutil.rmtree(folder)
    backup.rename(folder)
    return works


def solve(issue: str, repository: str, folder: Path, base_url: str, settings: dict) -> dict:
    before = transcript.snapshot(folder)
    text, steps = scripted(issue, repository, folder, settings)
    actions = candidates(text, base_url, settings)
    tests = localise.add_reproduction(folder, issue)
    chosen = next((a for a in actions if try_edit(folder, a, tests, settings["test_seconds"])),
                  actions[0] if actions else None)
    for path, original in before.items():  # the reproduction goes
        if localise.REPRODUCTION in (folder / path).read_text():
            (folder / path).write_text(original)
    if chosen:
        steps.append({"action": chosen, "observation": transcript.edit(folder, chosen)})
    steps.append({"candidates": len(actions), "reproduction": tests is not None})
    return {"diff": transcript.diff(before, folder), "steps": steps}


def answer(instance: dict, settings: dict, base_url: str) -> dict:
    given = instance["input"]
    try:
        result = solve(given["issue"], given["repository"], Path(instance["workspace"]),
                       base_url, settings)
    except Exception as err:  # one instance's failure must not cost the others
        result = {"diff": "", "steps": [], "error": f"{type(err).__name__}: {err}"}
    return {"id": instance["id"], "output": result.pop("diff"), "trajectory": result}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--decoding", default=None, help="ignored: this harness decides")
    args = parser.parse_args()
    settings = tomllib.loads((HERE / "harness.toml").read_text())
    instances = [json.loads(line) for line in args.inputs.read_text().splitlines() if line]
    with ThreadPoolExecutor(max_workers=settings["threads"]) as pool, \
            args.out.open("w") as out:
        for result in pool.map(lambda i: answer(i, settings, args.base_url), instances):
            out.write(json.dumps(result) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
