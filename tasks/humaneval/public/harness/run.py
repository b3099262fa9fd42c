"""humaneval harness: complete each function's body with one greedy call.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
IN lines are {"id", "input": {"prompt", "entry_point"}}: the prompt holds the imports,
the signature and the docstring. OUT gets one {"id", "output", "trajectory"} per line,
where output is the code that follows the prompt (the body, indented as it must be).
The scorer runs prompt + output + the hidden unit test.
"""

import argparse
import json
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client import complete

HERE = Path(__file__).parent
THREADS = 16
"""Requests in flight. Threads count against the sandbox's process limit, which on a host
without cgroup v1 controllers is one per-user limit shared by every sandbox at once."""


def solve(instance: dict, settings: dict, base_url: str) -> dict:
    prompt = instance["input"]["prompt"]
    result = complete(base_url, prompt, settings["decoding"], stop=settings["stop"])
    body = result["texts"][0].rstrip() + "\n"
    return {"id": instance["id"], "output": body, "trajectory": {"calls": [result["call"]]}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--decoding", default=None, help="ignored: this harness decides")
    args = parser.parse_args()
    settings = tomllib.loads((HERE / "harness.toml").read_text())
    instances = [json.loads(line) for line in args.inputs.read_text().splitlines() if line]
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        results = pool.map(lambda i: solve(i, settings, args.base_url), instances)
        with args.out.open("w") as out:
            for result in results:
                out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
