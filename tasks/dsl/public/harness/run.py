"""dsl harness: ask the model for a program that maps each shown input to its output.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
IN lines are {"id", "input": {"examples": [[in, out], ...]}}; OUT gets one
{"id", "output": program, "trajectory"} per line.
"""

import argparse
import json
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client import complete

HERE = Path(__file__).parent


def format_examples(examples: list[list[str]]) -> str:
    return "".join(f"in: {source} out: {target}\n" for source, target in examples)


def solve(instance: dict, settings: dict, base_url: str) -> dict:
    prompt = settings["prompt"].format(examples=format_examples(instance["input"]["examples"]))
    result = complete(base_url, prompt, settings["decoding"], stop=settings.get("stop"))
    program = result["texts"][0].strip()
    return {"id": instance["id"], "output": program, "trajectory": {"calls": [result["call"]]}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--decoding", default=None, help="ignored: this harness decides")
    args = parser.parse_args()
    settings = tomllib.loads((HERE / "harness.toml").read_text())
    instances = [json.loads(line) for line in args.inputs.read_text().splitlines() if line]
    with ThreadPoolExecutor(max_workers=64) as pool:
        results = pool.map(lambda i: solve(i, settings, args.base_url), instances)
        with args.out.open("w") as out:
            for result in results:
                out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
