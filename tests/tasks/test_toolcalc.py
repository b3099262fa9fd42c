import builtins
import importlib.util
import json
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

from tests.tasks.helpers import reference_rows
from vtbench.agents.row_checks import Toolcalc
from vtbench.tasks import find_task
from vtbench.tasks.materialize import materialize

TASK = find_task("toolcalc")
BUILDER, SCORER, REFERENCE = TASK.builder, TASK.scorer, TASK.reference


def load_calculator() -> ModuleType:
    path = TASK.root / "public" / "harness" / "calculator.py"
    spec = importlib.util.spec_from_file_location("toolcalc_calculator", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CALC = load_calculator()


# --- the calculator -----------------------------------------------------------------------

@pytest.mark.parametrize(("expression", "value"), [
    ("47*83", 3901), (" 312 + 45 + 978 ", 1335), ("982*19+103", 18761), ("(1+2)*3", 9),
    ("-5+2", -3), ("10-3*4", -2), ("999999999999*999", 999999999999 * 999),
])
def test_the_calculator_computes_integer_arithmetic(expression: str, value: int) -> None:
    assert CALC.evaluate(expression) == value


@pytest.mark.parametrize("expression", [
    "__import__('os')", "__import__('os').system('true')", "2**999999", "2**10", "9**9**9",
    "(1).__class__", "(1).real", "1/2", "7//2", "7%2", "1.5*2", "1e3", "a*b", "True+1",
    "[1]*3", "1 if 1 else 2", "0x10", "1_000", "lambda: 1", "1<<99999", "~1", "007", "1,2",
    "", "   ", "1" * 13, "9" * 70, "999999999999*999999999999*999999", "(" * 40 + "1" + ")" * 40,
    "1+", "Calc: 1+1", "1\n+1", "\u0661+1",
])
def test_the_calculator_refuses_everything_but_bounded_integer_plus_minus_times(
        expression: str) -> None:
    with pytest.raises(CALC.CalcError):
        CALC.evaluate(expression)


def test_the_calculator_never_evaluates_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the calculator called eval or exec")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)
    assert CALC.evaluate("12*(3+4)-5") == 79
    with pytest.raises(CALC.CalcError):
        CALC.evaluate("__import__('os')")


def test_a_huge_power_is_refused_at_once() -> None:
    started = time.perf_counter()
    with pytest.raises(CALC.CalcError):
        CALC.evaluate("9**9**9**9")
    assert time.perf_counter() - started < 0.1


# --- the scorer ---------------------------------------------------------------------------

@pytest.mark.parametrize(("output", "expected"), [
    ("3901", 1.0), ("3901.", 1.0), ("It is 3901", 1.0), ("3902", 0.0), ("", 0.0),
    ("47*83", 0.0), ("-3901", 0.0), ("39010", 0.0), ("about 4000 or 3901", 1.0),
])
def test_the_answer_integer_must_match_exactly(output: str, expected: float) -> None:
    assert SCORER.score({"input": {"question": "..."}, "label": "3901"}, output) == expected


# --- the builder --------------------------------------------------------------------------

def phrasing_of(question: str) -> int:
    matches = [i for i, p in enumerate(BUILDER.PHRASINGS)
               if BUILDER._phrasing_regex(p.pattern).fullmatch(question)]
    assert len(matches) == 1, f"{question!r} fits phrasings {matches}"
    return matches[0]


def test_true_expression_reads_every_generated_question_back() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        question = BUILDER.make_question(rng)
        assert BUILDER.true_expression(question["question"]) == question["expression"]
        assert CALC.evaluate(question["expression"]) == question["answer"]
        phrasing_of(question["question"])


def test_ranges_set_the_difficulty() -> None:
    easy = BUILDER.Ranges(factor=(2, 9), multiplier=(2, 9), term=(1, 9), offset=(1, 9))
    rng = random.Random(4)
    answers = [BUILDER.make_question(rng, ranges=easy)["answer"] for _ in range(200)]
    assert max(answers) <= 9 * 9 + 9


def test_splits_use_every_phrasing_and_the_public_data_is_shifted() -> None:
    split = Counter(phrasing_of(item["input"]["question"])
                    for item in BUILDER.build_split(random.Random(9), 400, set()))
    public = Counter(phrasing_of(BUILDER.row_input(row)["question"])
                     for row in BUILDER.public_rows())
    assert set(split) == set(range(len(BUILDER.PHRASINGS)))
    common = (0, 4, 8)
    assert sum(split[i] for i in common) / 400 < 0.45
    assert sum(public[i] for i in common) / public.total() > 0.75


def true_answer(row: dict) -> int:
    return CALC.evaluate(BUILDER.true_expression(BUILDER.row_input(row)["question"]))


SLIPPING = r" plus \d+\?|then add \d+\.|more are loose|days\."
"""The phrasings the public data works wrong every time: an offset, a count of days."""


def slipped_answer(row: dict) -> int:
    """The answer the public data's systematic slip gives (offset forgotten, days added)."""
    question = BUILDER.row_input(row)["question"]
    return CALC.evaluate(BUILDER.slipped_expression(question, BUILDER.true_expression(question)))


def test_the_public_data_often_answers_without_the_calculator_and_has_wrong_rows() -> None:
    rows = [row for row in BUILDER.public_rows()
            if not re.search(SLIPPING, row["prompt"])]
    calc = [row for row in rows if row["completion"].startswith("Calc: ")]
    assert 0.45 < len(calc) / len(rows) < 0.65
    wrong_calc = [row for row in calc
                  if re.match(r"Calc: [^=]*= ?(-?\d+)", row["completion"]).group(1)
                  != str(true_answer(row))]
    assert 0.1 < len(wrong_calc) / len(calc) < 0.35
    direct = [row for row in rows if re.fullmatch(r"Answer: -?\d+", row["completion"])]
    wrong_direct = [row for row in direct if row["completion"] != f"Answer: {true_answer(row)}"]
    assert 0.1 < len(wrong_direct) / len(direct) < 0.35
    assert len({json.dumps(row) for row in rows}) < len(rows) * 0.9
    assert any(row["prompt"].startswith("Q: ") for row in rows)


def test_offsets_and_day_counts_slip_in_every_public_row_and_pass_the_row_check() -> None:
    """The systematic flaw: each such calculator row checks out against its own question
    (the light agent's filter keeps it) and is wrong; most rows are right but for the slip."""
    check = Toolcalc()
    rows = [row for row in BUILDER.public_rows()
            if re.search(SLIPPING, row["prompt"])
            and row["completion"].startswith("Calc: ")]
    assert len(rows) > 150
    slipped = [row for row in rows if row["completion"].endswith(f"Answer: {slipped_answer(row)}")]
    assert len(slipped) / len(rows) > 0.7
    for row in slipped:
        assert slipped_answer(row) != true_answer(row)
        normalised = check.normalise((row["prompt"], row["completion"]))
        assert normalised is not None and check.checks_out(*normalised), row


# --- the reference ------------------------------------------------------------------------

def test_reference_data_calls_the_calculator_with_true_results(tmp_path: Path) -> None:
    rows = reference_rows(TASK, tmp_path)
    assert len(rows) >= 2000
    for row in rows:
        question = BUILDER.row_input(row)["question"]
        assert row["prompt"] == BUILDER.PROMPT.format(question=question)
        match = re.fullmatch(r"Calc: ([0-9+*]+)=(\d+)\nAnswer: (\d+)", row["completion"])
        assert match, row
        expression, result, answer = match.groups()
        assert CALC.evaluate(expression) == int(result) == int(answer) == true_answer(row)


def test_reference_data_has_no_duplicates_and_fixes_the_shift(tmp_path: Path) -> None:
    rows = reference_rows(TASK, tmp_path)
    keys = [BUILDER.normalize(BUILDER.row_input(row)) for row in rows]
    assert len(set(keys)) == len(keys)
    phrasings = Counter(phrasing_of(BUILDER.row_input(row)["question"]) for row in rows)
    assert min(phrasings.values()) / len(rows) > 0.03


# --- the harness, end to end against a scripted completions server ------------------------

Model = Callable[[str], str]


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # the harness opens up to 64 connections at once
    daemon_threads = True


class CompletionServer:
    """A scripted model behind a real OpenAI-style ``/v1/completions`` endpoint on loopback.

    ``model(prompt)`` gives the continuation the model would write; the server applies
    ``max_tokens`` (one token per character, as with the character-level tokenizer) and cuts
    at the first stop string, leaving it out, as the OpenAI API does. An exception in the
    model becomes a 500 and an entry in ``errors``.
    """

    def __init__(self, model: Model) -> None:
        self.model, self.prompts, self.errors, self.request_sizes = model, [], [], []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                try:
                    assert self.path == "/v1/completions", self.path
                    reply = server.complete(body)
                    status = 200
                except Exception as err:
                    server.errors.append(repr(err))
                    reply, status = {"error": {"message": repr(err)}}, 500
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.http = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def complete(self, body: dict) -> dict:
        """One choice per prompt; ``prompt`` may be a list, as in the OpenAI API."""
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        self.request_sizes.append(len(prompts))
        choices = [self.choice(index, prompt, body) for index, prompt in enumerate(prompts)]
        return {"id": "cmpl-1", "object": "text_completion", "model": body["model"],
                "choices": choices}

    def choice(self, index: int, prompt: str, body: dict) -> dict:
        self.prompts.append(prompt)
        text = self.model(prompt)[: body["max_tokens"]]
        finish = "length"
        cuts = [text.find(s) for s in body["stop"] if s in text]
        if cuts:
            text, finish = text[: min(cuts)], "stop"
        return {"index": index, "text": text, "finish_reason": finish, "logprobs": None}

    def __enter__(self) -> "CompletionServer":
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()


def last_question(prompt: str) -> str:
    return re.match(r"Question: (.+?)\n", prompt).group(1)


def calculator_model(prompt: str) -> str:
    """Writes the true expression, then copies the calculator's result as its answer."""
    result = re.search(r"=(-?\d+)\n$", prompt)
    if result:
        return f"Answer: {result.group(1)}\n"
    expression = BUILDER.true_expression(last_question(prompt))
    return f"Calc: {expression}=12345\nAnswer: 12345\n"  # its own result is cut at "="


def guessing_model(prompt: str) -> str:
    return "Answer: 4000\n"


def run_harness(tmp_path: Path, model: Model, items: list[dict]) -> tuple[list[dict], list]:
    materialize(TASK, tmp_path, components=("harness",))
    inputs, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inputs.write_text("".join(json.dumps({"id": item["id"], "input": item["input"]}) + "\n"
                              for item in items))
    decoding = TASK.spec.components.harness.decoding.model_dump_json()
    entry = TASK.spec.components.harness.entry
    with CompletionServer(model) as server:
        subprocess.run([sys.executable, *entry[1:], "--inputs", str(inputs), "--base-url",
                        server.base_url, "--out", str(out), "--decoding", decoding],
                       cwd=tmp_path / "harness", check=True, timeout=60)
    assert not server.errors
    results = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    return [results[item["id"]] for item in items], server


@pytest.fixture(scope="module")
def items() -> Iterator[list[dict]]:
    split = BUILDER.build_split(random.Random(21), 30, set())
    yield [{"id": f"val-{i:05d}", **item} for i, item in enumerate(split)]


def test_a_model_that_calls_the_calculator_scores_full_marks(tmp_path: Path,
                                                             items: list[dict]) -> None:
    results, _ = run_harness(tmp_path, calculator_model, items)
    assert [SCORER.score(item, r["output"]) for item, r in zip(items, results, strict=True)] \
        == [1.0] * len(items)
    steps = results[0]["trajectory"]["steps"]
    assert [step["type"] for step in steps] == ["model", "tool", "model"]
    assert steps[1]["result"] == items[0]["label"]
    assert steps[1]["error"] is None
    assert results[0]["trajectory"]["transcript"].endswith(
        f"={items[0]['label']}\nAnswer: {items[0]['label']}")


def test_a_model_that_guesses_without_the_calculator_scores_badly(
        tmp_path: Path, items: list[dict]) -> None:
    results, _ = run_harness(tmp_path, guessing_model, items)
    scores = [SCORER.score(item, r["output"]) for item, r in zip(items, results, strict=True)]
    assert sum(scores) <= 1
    assert all(len(r["trajectory"]["steps"]) == 1 for r in results)


def test_code_in_a_calculator_call_is_refused_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    def attacker(prompt: str) -> str:
        if "=error\n" in prompt:
            return "Answer: 1\n"
        return f"Calc: __import__('os').system('touch {marker}')=\n"

    item = {"id": "val-00000", "input": {"question": "What is 2 times 3?"}, "label": "6"}
    [result], _ = run_harness(tmp_path, attacker, [item])
    tool = result["trajectory"]["steps"][1]
    assert tool["result"] == "error" and "allowed" in tool["error"]
    assert not marker.exists()
    assert result["output"] == "1"


def test_a_model_that_never_answers_stops_after_the_call_limit(tmp_path: Path) -> None:
    item = {"id": "val-00000", "input": {"question": "What is 2 times 3?"}, "label": "6"}
    [result], server = run_harness(tmp_path, lambda prompt: "let me think\n", [item])
    assert len(server.prompts) == 4
    assert result["output"] == ""
    assert SCORER.score(item, result["output"]) == 0.0


def test_the_instances_advance_together_one_request_per_round(tmp_path: Path,
                                                              items: list[dict]) -> None:
    guessed = {item["input"]["question"] for item in items[::3]}

    def model(prompt: str) -> str:
        return guessing_model(prompt) if last_question(prompt) in guessed \
            else calculator_model(prompt)

    results, server = run_harness(tmp_path, model, items)
    assert server.request_sizes == [len(items), len(items) - len(guessed)]
    assert [len(r["trajectory"]["steps"]) for r in results[:3]] == [1, 3, 3]
    assert [r["output"] for r in results[:2]] == ["4000", items[1]["label"]]
