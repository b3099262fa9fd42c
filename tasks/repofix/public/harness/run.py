"""repofix harness: an agent loop with a shell tool, one repository per instance.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
IN lines are {"id", "input": {"issue", "repository"}, "workspace"}: ``workspace`` is the
instance's own copy of the library, with the bug and without the tests that fail (they
are restored when the answer is scored). OUT gets one {"id", "output", "trajectory"} per
line, where output is a unified diff of the library's files (paths relative to the
workspace, ``a/`` and ``b/`` prefixes as git writes them). The scorer applies it to a fresh
copy with every test in place; a diff that touches tests scores 0.
"""

import argparse
import json
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agent import solve

HERE = Path(__file__).parent


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
