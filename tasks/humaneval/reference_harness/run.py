"""humaneval reference harness: greedy plus sampled bodies, keep the one that does best on
the docstring's own examples.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
It sends each prompt without its final newline (see :func:`split_prompt`): SmolLM2's
tokenizer merges a newline with the indentation after it, so a prompt that ends on a
lone newline token makes the untrained model start a new top-level line, not the body.
For each prompt it asks for one greedy body and ``samples`` sampled ones, then runs each
candidate (prompt + body) in a subprocess with a timeout: a body that does not compile
scores -1, otherwise the share of the docstring's ``>>>`` examples it passes (doctest).
The best one wins; ties keep the earlier (greedy first).
"""

import argparse
import json
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client import complete

HERE = Path(__file__).parent
THREADS = 16
"""Requests in flight. Threads count against the sandbox's process limit, which on a host
without cgroup v1 controllers is one per-user limit shared by every sandbox at once."""
CHECK = r"""
import doctest, json, sys
name, source = sys.argv[1], sys.stdin.read()
space = {}
try:
    exec(compile(source, "<candidate>", "exec"), space)
except BaseException:
    print(json.dumps(-1.0)); sys.exit()
tests = doctest.DocTestFinder().find(space[name], name, globs=space) if name in space else []
runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
for test in tests:
    runner.run(test, out=lambda text: None)
result = runner.summarize(verbose=False)
passed = result.attempted - result.failed
print(json.dumps(passed / result.attempted if result.attempted else 0.0))
"""


def examples_score(prompt: str, body: str, entry_point: str, timeout: float) -> float:
    try:
        done = subprocess.run([sys.executable, "-c", CHECK, entry_point], input=prompt + body,
                              capture_output=True, text=True, timeout=timeout)
        return float(json.loads(done.stdout.strip().splitlines()[-1]))
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        return -1.0


def split_prompt(prompt: str) -> tuple[str, str]:
    """The text to send, and what the model then writes first that is already in the
    prompt (its final newline, cut from each body)."""
    if prompt.endswith("\n"):
        return prompt[:-1], "\n"
    return prompt, ""


def solve(instance: dict, settings: dict, base_url: str) -> dict:
    prompt, entry = instance["input"]["prompt"], instance["input"]["entry_point"]
    sent, written = split_prompt(prompt)
    greedy = complete(base_url, sent, settings["decoding"], stop=settings["stop"])
    sampled = complete(base_url, sent, settings["sampling"], stop=settings["stop"],
                       n=settings["samples"], seed=settings.get("seed"))
    bodies = [text.removeprefix(written).rstrip() + "\n"
              for text in greedy["texts"] + sampled["texts"]]
    scores = [examples_score(prompt, body, entry, settings["check_timeout"]) for body in bodies]
    best = max(range(len(bodies)), key=lambda i: (scores[i], -i))
    return {"id": instance["id"], "output": bodies[best],
            "trajectory": {"calls": [greedy["call"], sampled["call"]], "scores": scores,
                           "chosen": best}}


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
