"""humaneval reference harness: greedy plus sampled bodies, keep the one that does best on
the docstring's own examples.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
It sends each prompt without its final newline (see :func:`split_prompt`): SmolLM2's
tokenizer merges a newline with the indentation after it, so a prompt that ends on a
lone newline token makes the untrained model start a new top-level line, not the body.
For each prompt it asks for one greedy body and ``samples`` sampled ones (all capped at
the same ``max_tokens``, so a greedy row never keeps a server batch running longer), then
runs each candidate (prompt + body) in a subprocess with a timeout: a body that does not
compile scores -1, otherwise the share of the docstring's examples it passes. Examples
are the ``>>>`` doctests plus lines that show a call and its value in prose
(``f(1, 2) ➞ 3``, ``f("a") == "b"``, ``f(x) should return 5``; see :func:`call_examples`):
fewer than half of HumanEval's prompts have doctests. The best one wins; ties keep the
earlier (greedy first).
"""

import argparse
import ast
import json
import re
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
import doctest, json, math, sys
job = json.loads(sys.stdin.read())
name, space = job["name"], {}
try:
    exec(compile(job["source"], "<candidate>", "exec"), space)
except BaseException:
    print(json.dumps(-1.0)); sys.exit()
tests = doctest.DocTestFinder().find(space[name], name, globs=space) if name in space else []
runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
for test in tests:
    runner.run(test, out=lambda text: None)
result = runner.summarize(verbose=False)
attempted, passed = result.attempted, result.attempted - result.failed

def same(got, want):
    if isinstance(want, float) or isinstance(got, float):
        try:
            return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)
        except TypeError:
            return False
    return got == want

for call, expected in job["calls"]:
    attempted += 1
    try:
        passed += bool(same(eval(call, space), eval(expected, {})))
    except BaseException:
        pass
print(json.dumps(passed / attempted if attempted else 0.0))
"""
SEPARATORS = re.compile(r"^\s*(?:#\s*)?(?:==>|=>|➞|->|==|=|should return|returns?)\s*")
LITERALS = {"true": "True", "false": "False", "none": "None"}


def call_at(line: str, start: int) -> str | None:
    """The call expression that starts at ``start`` (balanced parentheses), if any."""
    depth = 0
    for index in range(line.index("(", start), len(line)):
        depth += {"(": 1, ")": -1}.get(line[index], 0)
        if depth == 0:
            return line[start:index + 1]
    return None


def literal(text: str) -> str | None:
    """``text`` (or its part after a last ``=``, for ``1 + 9 = 10``) as a Python literal."""
    text = text.strip().rstrip(".").strip()
    for candidate in (text, text.rsplit("=", 1)[-1].strip()):
        candidate = LITERALS.get(candidate.lower(), candidate)
        try:
            ast.literal_eval(candidate)
            return candidate
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None


def call_examples(prompt: str, entry_point: str) -> list[list[str]]:
    """``[call, expected]`` pairs from docstring lines that show a call with literal
    arguments and, after a separator, a literal value (doctest lines are left out)."""
    found = []
    for line in prompt.splitlines():
        start = line.find(entry_point + "(")
        if start < 0 or line.lstrip().startswith((">>>", "def ")):
            continue
        call = call_at(line, start)
        if call is None:
            continue
        try:
            node = ast.parse(call, mode="eval").body
            assert isinstance(node, ast.Call)
            for argument in node.args:
                ast.literal_eval(argument)
        except (SyntaxError, ValueError, AssertionError, TypeError, RecursionError):
            continue
        rest = line[start + len(call):]
        separator = SEPARATORS.match(rest)
        expected = literal(rest[separator.end():].split("#")[0]) if separator else None
        if expected is not None:
            found.append([call, expected])
    return found


def examples_score(prompt: str, body: str, entry_point: str, timeout: float) -> float:
    job = {"name": entry_point, "source": prompt + body,
           "calls": call_examples(prompt, entry_point)}
    try:
        done = subprocess.run([sys.executable, "-c", CHECK], input=json.dumps(job),
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
    greedy_settings = {**settings["decoding"], "max_tokens": settings["sampling"]["max_tokens"]}
    greedy = complete(base_url, sent, greedy_settings, stop=settings["stop"])
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
