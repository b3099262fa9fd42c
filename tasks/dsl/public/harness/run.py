"""dsl harness: ask the model for a program that maps each shown input to its output.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
IN lines are {"id", "input": {"examples": [[in, out], ...]}}; OUT gets one
{"id", "output": program, "trajectory"} per line. Prompts go to the model server many
to a request (see client.complete_all).
"""

import argparse
import json
import tomllib
from pathlib import Path

from client import complete_all

HERE = Path(__file__).parent


def format_examples(examples: list[list[str]]) -> str:
    return "".join(f"in: {source} out: {target}\n" for source, target in examples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--decoding", default=None, help="ignored: this harness decides")
    args = parser.parse_args()
    settings = tomllib.loads((HERE / "harness.toml").read_text())
    instances = [json.loads(line) for line in args.inputs.read_text().splitlines() if line]
    prompts = [settings["prompt"].format(examples=format_examples(i["input"]["examples"]))
               for i in instances]
    results = complete_all(args.base_url, prompts, settings["decoding"],
                           stop=settings.get("stop"))
    with args.out.open("w") as out:
        for instance, result in zip(instances, results, strict=True):
            out.write(json.dumps({"id": instance["id"], "output": result["texts"][0].strip(),
                                  "trajectory": {"calls": [result["call"]]}}) + "\n")


if __name__ == "__main__":
    main()
