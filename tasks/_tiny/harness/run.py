"""Harness: one greedy completion per instance from a prompt template.

Instances go to the model server in chunks of ``CHUNK`` prompts per request, a few
requests at a time, so that the server always has a full batch waiting.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl [--decoding JSON]
IN lines are {"id", "input": {...}}; OUT gets one {"id", "output", "trajectory"} per line.
The prompt template and stop strings come from harness.toml beside this file.
"""

import argparse
import json
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client import complete_many

HERE = Path(__file__).parent
CHUNK = 64
PARALLEL_REQUESTS = 4


def solve(chunk: list[dict], settings: dict, base_url: str, decoding: dict) -> list[dict]:
    prompts = [settings["prompt"].format(**instance["input"]) for instance in chunk]
    results = complete_many(base_url, prompts, decoding, stop=settings.get("stop"))
    return [{"id": instance["id"], "output": result["texts"][0].strip(),
             "trajectory": {"calls": [result["call"]]}}
            for instance, result in zip(chunk, results, strict=True)]


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
    chunks = [instances[i:i + CHUNK] for i in range(0, len(instances), CHUNK)]
    with ThreadPoolExecutor(max_workers=PARALLEL_REQUESTS) as pool:
        results = pool.map(lambda chunk: solve(chunk, settings, args.base_url, decoding), chunks)
        with args.out.open("w") as out:
            for chunk_results in results:
                for result in chunk_results:
                    out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
