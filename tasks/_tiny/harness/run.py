"""Harness: one greedy completion per instance from a prompt template.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl [--decoding JSON]
IN lines are {"id", "input": {...}}; OUT gets one {"id", "output", "trajectory"} per line.
The prompt template and stop strings come from harness.toml beside this file. Prompts go
to the model server many to a request (see client.complete_all).
"""

import argparse
import json
import tomllib
from pathlib import Path

from client import complete_all

HERE = Path(__file__).parent


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
    prompts = [settings["prompt"].format(**instance["input"]) for instance in instances]
    results = complete_all(args.base_url, prompts, decoding, stop=settings.get("stop"))
    with args.out.open("w") as out:
        for instance, result in zip(instances, results, strict=True):
            out.write(json.dumps({"id": instance["id"], "output": result["texts"][0].strip(),
                                  "trajectory": {"calls": [result["call"]]}}) + "\n")


if __name__ == "__main__":
    main()
