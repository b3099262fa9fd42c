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
"""

import argparse
import json
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from calculator import CalcError, evaluate
from client import complete

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


def solve(instance: dict, settings: dict, base_url: str, decoding: dict) -> dict:
    text = settings["prompt"].format(**instance["input"])
    steps: list[dict] = []
    output = ""
    for _ in range(settings["max_model_calls"]):
        result = complete(base_url, text, decoding, stop=settings["stop"])
        line = result["texts"][0]
        steps.append({"type": "model", **result["call"]})
        text += line
        if line.startswith("Answer:"):
            output = line[len("Answer:"):].strip()
            break
        if not line:
            break
        if line.startswith("Calc:"):
            appended, step = tool_call(line)
            steps.append(step)
            text += appended
        else:
            text += "\n"
    trajectory = {"steps": steps, "transcript": text}
    return {"id": instance["id"], "output": output, "trajectory": trajectory}


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
    with ThreadPoolExecutor(max_workers=64) as pool:
        results = pool.map(lambda i: solve(i, settings, args.base_url, decoding), instances)
        with args.out.open("w") as out:
            for result in results:
                out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
