"""bfcl reference harness: the initial harness's prompt, calls repaired against the
documents, a vote over samples, and the multi-turn loop run against the task's backends.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl (see the initial
harness's docstring for the input and output shapes).

One question: the question and the documents in the harness's ``prompt`` (see
prompting.py), then one greedy reply and ``samples`` sampled ones. Each is parsed and repaired
(prompting.repair); among the replies whose calls are all valid, the answer given most
often wins (the earliest, greedy first, on a tie); with none valid, the greedy reply's.

Several turns: the first turn's question in the ``prompt`` with the documents as signature
lines, the later turns' messages as they are; per user turn, up to ``max_steps`` steps: the
model answers, its calls are repaired and run against the entry's backends (``bfcl_eval/``,
the classes the scorer runs them against, through BFCL's own executor), and their results
come back as a user message; a reply with no call ends the turn. The backends keep their
state from turn to turn, as the scorer's do. Old results are shortened when the prompt would
outgrow the context.
"""

import argparse
import json
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client import chat
from prompting import call_string, first_message, parse_calls, repair, results_message

HERE = Path(__file__).parent
THREADS = 8
"""Requests in flight (each instance's calls run one after another)."""
CHARS_PER_TOKEN = 3.0
"""A cautious estimate for SmolLM2's tokenizer on JSON and code."""


def fits(messages: list[dict], settings: dict) -> bool:
    size = sum(len(m["content"]) for m in messages) / CHARS_PER_TOKEN
    return size + settings["sampling"]["max_tokens"] <= settings["context_tokens"]


def candidates(texts: list[str], functions: list[dict]) -> list[tuple[str, bool]]:
    """Each reply's repaired calls as canonical JSON, and whether all of them are valid."""
    found = []
    for text in texts:
        parsed = parse_calls(text) or []
        calls, valid = [], bool(parsed)
        for name, arguments in parsed:
            name, arguments, ok = repair(name, arguments, functions)
            calls.append({name: arguments})
            valid = valid and ok
        found.append((json.dumps(calls, sort_keys=True), valid))
    return found


def vote(found: list[tuple[str, bool]]) -> str:
    valid = [answer for answer, ok in found if ok]
    if not valid:
        return found[0][0]
    counts = Counter(valid)
    return max(valid, key=lambda answer: (counts[answer], -valid.index(answer)))


def single_turn(task: dict, settings: dict, base_url: str) -> tuple[str, dict]:
    functions, question = task["functions"], task["question"][0][-1]["content"]
    messages = [{"role": "user", "content": first_message(settings["prompt"], question,
                                                          functions, compact=False)}]
    if not fits(messages, settings):
        messages[0]["content"] = first_message(settings["prompt"], question, functions,
                                               compact=True)
    greedy = chat(base_url, messages, settings["decoding"])
    sampled = chat(base_url, messages, settings["sampling"], n=settings["samples"],
                   seed=settings.get("seed"))
    found = candidates(greedy["texts"] + sampled["texts"], functions)
    answer = vote(found)
    calls = json.loads(answer)
    return json.dumps(calls), {"calls": [greedy["call"], sampled["call"]],
                               "candidates": found, "chosen": answer}


def shorten_results(messages: list[dict], settings: dict) -> None:
    """Cut old results messages (oldest first) until the prompt fits."""
    for message in messages[1:-1]:
        if fits(messages, settings):
            return
        if message["role"] == "user" and message["content"].startswith("Results:"):
            message["content"] = message["content"][:200] + " ..."


def run_step(messages: list[dict], task: dict, settings: dict, base_url: str,
             context: dict) -> tuple[list[str], dict]:
    """One model reply and the execution of its calls; the calls run (none ends the turn)."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import (
        execute_multi_turn_func_call,
    )

    shorten_results(messages, settings)
    reply = chat(base_url, messages, settings["decoding"])
    text = reply["texts"][0]
    parsed = parse_calls(text) or []
    calls = [call_string(*repair(name, arguments, task["functions"])[:2])
             for name, arguments in parsed]
    step = {"reply": text, "calls": calls, "error": reply["error"]}
    if not calls:
        return [], step
    results, _ = execute_multi_turn_func_call(
        calls, task["initial_config"], task["involved_classes"], context["model"],
        context["id"])
    step["results"] = results
    messages += [{"role": "assistant", "content": text},
                 {"role": "user", "content": results_message(calls, results)}]
    return calls, step


def multi_turn(task: dict, settings: dict, base_url: str, instance_id: str) -> tuple[str, dict]:
    functions, messages = task["functions"], []
    context = {"model": "reference_harness", "id": instance_id}
    turns, log = [], []
    for index, turn in enumerate(task["question"]):
        if index == 0:
            *before, last = turn
            turn = [*before, {**last, "content": first_message(
                settings["prompt"], last["content"], functions, compact=True)}]
        messages += turn
        steps = []
        for _ in range(settings["max_steps"]):
            calls, step = run_step(messages, task, settings, base_url, context)
            log.append(step)
            if not calls:
                break
            steps.append(calls)
        turns.append(steps)
    return json.dumps(turns), {"steps": log, "first": messages[0]["content"][:2000]}


def solve(instance: dict, settings: dict, base_url: str) -> dict:
    task = instance["input"]
    try:
        if "involved_classes" in task:
            output, trajectory = multi_turn(task, settings, base_url, instance["id"])
        else:
            output, trajectory = single_turn(task, settings, base_url)
    except Exception as err:  # one instance's failure is not the run's
        output, trajectory = "[]", {"error": f"{type(err).__name__}: {err}"}
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
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        results = pool.map(lambda i: solve(i, settings, args.base_url), instances)
        with args.out.open("w") as out:
            for result in results:
                out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
