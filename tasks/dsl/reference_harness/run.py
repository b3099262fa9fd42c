"""dsl harness: sample several programs, keep those that reproduce the shown examples,
answer with the most frequent survivor (the greedy program when none survives).

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
Prompts go to the model server many to a request (see client.complete_all).
"""

import argparse
import json
import tomllib
from collections import Counter
from pathlib import Path

import dsl
from client import complete_all

HERE = Path(__file__).parent


def format_examples(examples: list[list[str]]) -> str:
    return "".join(f"in: {source} out: {target}\n" for source, target in examples)


def fits(program: str, examples: list[list[str]]) -> bool:
    return all(dsl.run(program, source) == target for source, target in examples)


def choose(instance: dict, greedy: dict, sampled: dict) -> dict:
    examples = instance["input"]["examples"]
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
    prompts = [settings["prompt"].format(examples=format_examples(i["input"]["examples"]))
               for i in instances]
    stop = settings.get("stop")
    greedy = complete_all(args.base_url, prompts, settings["decoding"], stop=stop)
    sampled = complete_all(args.base_url, prompts, settings["sampling"], stop=stop,
                           n=settings["samples"], seed=settings.get("seed"))
    with args.out.open("w") as out:
        for instance, first, samples in zip(instances, greedy, sampled, strict=True):
            out.write(json.dumps(choose(instance, first, samples)) + "\n")


if __name__ == "__main__":
    main()
