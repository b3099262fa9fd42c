"""bfcl harness: ask the model once per instance and read the calls out of its reply.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl
IN lines are {"id", "input": {"question", "functions", ...}}: ``question`` is a list of
user turns (each a list of chat messages), ``functions`` the JSON-schema documents of the
functions the model may call; a multi-turn instance also has ``initial_config`` and
``involved_classes`` (the backends its calls run against: see ``bfcl_eval/``, which holds
them). OUT gets one {"id", "output", "trajectory"} per line, where output is JSON text:
- one question: the calls, ``[{"function_name": {"parameter": value}}, ...]``;
- several turns: per turn, per step, the call strings,
  ``[[["cd(folder='docs')", "ls()"]], [["mv(source='a', destination='b')"]], ...]``.

This harness sends the first turn only, in one plain user message, greedily, and takes
the calls written as Python, ``[f(a=1), g(b='x')]``; a multi-turn instance gets those
calls as its first turn and nothing for the others (no call is executed).
"""

import argparse
import ast
import json
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client import chat

HERE = Path(__file__).parent
THREADS = 8
"""Requests in flight. Threads count against the sandbox's process limit, which on a host
without cgroup v1 controllers is one per-user limit shared by every sandbox at once."""


def parse_calls(text: str) -> list[dict]:
    """The calls of a reply like ``[f(a=1), g(b='x')]``; none if it does not parse."""
    start, end = text.find("["), text.rfind("]")
    source = text[start:end + 1] if 0 <= start < end else text.strip()
    try:
        tree = ast.parse(source, mode="eval").body
        nodes = tree.elts if isinstance(tree, ast.List) else [tree]
        calls = []
        for node in nodes:
            if not isinstance(node, ast.Call):
                return []
            arguments = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            calls.append({ast.unparse(node.func): arguments})
        return calls
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return []


def call_string(call: dict) -> str:
    (name, arguments), = call.items()
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def solve(instance: dict, settings: dict, base_url: str) -> dict:
    task = instance["input"]
    question = task["question"][0][-1]["content"]
    content = settings["prompt"].format(question=question,
                                        functions=json.dumps(task["functions"]))
    messages = [{"role": "user", "content": content}]
    result = chat(base_url, messages, settings["decoding"])
    calls = parse_calls(result["texts"][0])
    if "involved_classes" in task:
        first_turn = [[call_string(c) for c in calls]] if calls else []
        output = json.dumps([first_turn] + [[] for _ in task["question"][1:]])
    else:
        output = json.dumps(calls)
    return {"id": instance["id"], "output": output,
            "trajectory": {"messages": messages, "calls": [result["call"]]}}


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
