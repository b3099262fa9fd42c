"""shell harness: ask the model once, greedily, and keep the first line of its reply.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
IN lines are {"id", "input": {"query", "image"}}: the request in English and the file
system it is asked over (base64 of a gzipped tar of its top-level folders, e.g. testbed/,
which the grader places at /testbed). OUT gets one {"id", "output", "trajectory"} per line,
where output is the bash command. The grader runs it over a fresh copy of the file system
and compares what it does with what a hidden gold command does.
"""

import argparse
import json
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client import complete

HERE = Path(__file__).parent
THREADS = 64
"""Requests in flight: the model server batches them, so an untrained model's 64-token
replies on a CPU cost a validation 2 minutes at 64, 3 at 16."""


def chat_prompt(settings: dict, query: str) -> str:
    request = settings["request"].replace("{query}", query)
    return (f"<|im_start|>system\n{settings['system']}<|im_end|>\n"
            f"<|im_start|>user\n{request}<|im_end|>\n<|im_start|>assistant\n")


def solve(instance: dict, settings: dict, base_url: str) -> dict:
    prompt = chat_prompt(settings, instance["input"]["query"])
    result = complete(base_url, prompt, settings["decoding"], stop=settings["stop"])
    lines = result["texts"][0].strip().splitlines()
    return {"id": instance["id"], "output": lines[0] if lines else "",
            "trajectory": {"calls": [result["call"]]}}


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
