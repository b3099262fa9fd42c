"""Harness: one greedy completion per instance from a prompt template.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl [--decoding JSON]
IN lines are {"id", "input": {...}}; OUT gets one {"id", "output", "trajectory"} per line.
The prompt template and stop strings come from harness.toml beside this file.
"""

import argparse
import json
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client import complete

HERE = Path(__file__).parent


def solve(instance: dict, settings: dict, base_url: str, decoding: dict) -> dict:
    prompt = settings["prompt"].format(**instance["input"])
    result = complete(base_url, prompt, decoding, stop=settings.get("stop"))
    output = result["texts"][0].strip()
    return {"id": instance["id"], "output": output, "trajectory": {"calls": [result["call"]]}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--decoding", default=None, help="JSON decoding settings")
    args = parser.parse_args()
    settings = tomllib.loads((HERE / "harness.toml").read_text())
    decoding = json.loads(args.decoding) if args.decoding else settings["decoding"]
    instances = [json.loads(line) for line in args.inputs.read_text().splitlines() if line]
    with ThreadPoolExecutor(max_workers=64) as pool:
        results = pool.map(lambda i: solve(i, settings, args.base_url, decoding), instances)
        with args.out.open("w") as out:
            for result in results:
                out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
