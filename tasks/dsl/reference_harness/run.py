"""dsl harness: sample several programs, keep those that reproduce the shown examples,
answer with the most frequent survivor (the greedy program when none survives).

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
"""

import argparse
import json
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dsl
from client import complete

HERE = Path(__file__).parent


def format_examples(examples: list[list[str]]) -> str:
    return "".join(f"in: {source} out: {target}\n" for source, target in examples)


def fits(program: str, examples: list[list[str]]) -> bool:
    return all(dsl.run(program, source) == target for source, target in examples)


def solve(instance: dict, settings: dict, base_url: str) -> dict:
    examples = instance["input"]["examples"]
    prompt = settings["prompt"].format(examples=format_examples(examples))
    greedy = complete(base_url, prompt, settings["decoding"], stop=settings.get("stop"))
    sampled = complete(base_url, prompt, settings["sampling"], stop=settings.get("stop"),
                       n=settings["samples"], seed=settings.get("seed"))
    candidates = [text.strip() for text in greedy["texts"] + sampled["texts"]]
    survivors = [program for program in candidates if fits(program, examples)]
    output = Counter(survivors).most_common(1)[0][0] if survivors else candidates[0]
    trajectory = {"calls": [greedy["call"], sampled["call"]],
                  "survivors": survivors, "chosen": output}
    return {"id": instance["id"], "output": output, "trajectory": trajectory}


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
