"""Harness with a calculator tool: the model may write "Calc: EXPR=" and the harness fills in
the result.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl [--decoding JSON]
IN lines are {"id", "input": {"question"}}; OUT gets one {"id", "output", "trajectory"} per
line. The model continues the prompt one line at a time (each call stops at "=" or a
newline). A line starting "Calc:" is a calculator call: the harness evaluates the text
after "Calc:" with calculator.evaluate (never eval) and appends "=RESULT" (or "=error") and a
newline. A line starting "Answer:" ends the instance; its text after "Answer:" is the
output. Any other line is kept and the model goes on, up to max_model_calls calls; without
an answer line the output is empty. The trajectory records every model and tool call.
The instances advance together, one line per round, their prompts many to a request.
"""

import argparse
import json
import time
import tomllib
from pathlib import Path

from calculator import CalcError, evaluate
from client import complete_all

HERE = Path(__file__).parent


def tool_call(line: str) -> tuple[str, dict]:
    """The text to append after a "Calc:" line, and the trajectory entry of the call."""
    expression = line[len("Calc:"):]
    started = time.time()
    try:
        result, error = str(evaluate(expression)), None
    except CalcError as err:
        result, error = "error", str(err)
    step = {"type": "tool", "name": "calculator", "expression": expression.strip(),
            "result": result, "error": error, "seconds": round(time.time() - started, 6)}
    return f"={result}\n", step


def step(state: dict, result: dict) -> bool:
    """Take one model line into the instance's state; whether the instance goes on."""
    line = result["texts"][0]
    state["steps"].append({"type": "model", **result["call"]})
    state["text"] += line
    if line.startswith("Answer:"):
        state["output"] = line[len("Answer:"):].strip()
        return False
    if not line:
        return False
    if line.startswith("Calc:"):
        appended, tool_step = tool_call(line)
        state["steps"].append(tool_step)
        state["text"] += appended
    else:
        state["text"] += "\n"
    return True


def solve_all(instances: list[dict], settings: dict, base_url: str,
              decoding: dict) -> list[dict]:
    """Every instance, one model line per round: each round's prompts go to the server
    together, so that it batches them at once."""
    states = [{"text": settings["prompt"].format(**instance["input"]), "steps": [],
               "output": ""} for instance in instances]
    active = states
    for _ in range(settings["max_model_calls"]):
        if not active:
            break
        results = complete_all(base_url, [s["text"] for s in active], decoding,
                               stop=settings["stop"])
        active = [s for s, result in zip(active, results, strict=True) if step(s, result)]
    return [{"id": instance["id"], "output": state["output"],
             "trajectory": {"steps": state["steps"], "transcript": state["text"]}}
            for instance, state in zip(instances, states, strict=True)]


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
    with args.out.open("w") as out:
        for result in solve_all(instances, settings, args.base_url, decoding):
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
