"""The bfcl harnesses: the initial one's naive reading of calls, the reference one's repair
and its multi-turn loop against the task's backends (with a scripted model), and (slow)
the initial harness end to end with SmolLM2-135M in its sandbox."""

import copy
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.tasks.bfcl_helpers import (
    TASK,
    answer_calls,
    as_text,
    bfcl_accepts_multi,
    bfcl_accepts_single,
    builder,
    scorer,
    steps_as_text,
    truth_turns,
)
from vtbench.tasks.materialize import materialize
from vtbench.tasks.registry import import_file

# ------------------------------------------------------------------ the harnesses

def test_the_initial_harness_reads_python_calls_and_nothing_else(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TASK.root / "public" / "harness"))
    monkeypatch.delitem(sys.modules, "client", raising=False)
    run = import_file(TASK.root / "public" / "harness" / "run.py", "bfcl_initial_t")
    assert run.parse_calls("[math.floor(x=2.5), f(a='b')]") == [
        {"math.floor": {"x": 2.5}}, {"f": {"a": "b"}}]
    assert run.parse_calls("Sure: [f(a=1)] done") == [{"f": {"a": 1}}]
    assert run.parse_calls("f(a=1, b=None)") == [{"f": {"a": 1, "b": None}}]
    for text in ("I cannot help", "[f(a=g(1))]", "[1, 2]", "[f(a=1)"):
        assert run.parse_calls(text) == []
    assert run.call_string({"cd": {"folder": "a'b"}}) == "cd(folder=\"a'b\")"


@pytest.fixture
def prompting():
    return import_file(TASK.root / "reference_harness" / "prompting.py", "bfcl_prompting_t")


def test_the_reference_harness_repairs_calls_against_the_documents(prompting) -> None:
    item = next(i for i in builder.category_items("simple_python")
                if i["label"]["ground_truth"][0].get("calculate_triangle_area"))
    functions = item["input"]["functions"]
    name, arguments, valid = prompting.repair(
        "calculate_triangle_are", {"base": "10", "height": 5.0, "colour": "red"}, functions)
    assert (name, valid) == ("calculate_triangle_area", False)  # 5.0 is no integer
    name, arguments, valid = prompting.repair(
        "calculate_triangle_area", {"base": "10", "height": 5}, functions)
    assert (arguments, valid) == ({"base": 10, "height": 5}, True)
    assert prompting.repair("calculate_triangle_area", {"base": 10}, functions)[2] is False
    assert prompting.parse_calls("```python\n[f(unit=km, n=-2)]\n```") == [
        ("f", {"unit": "km", "n": -2})]
    assert prompting.parse_calls("no calls here") is None
    assert "calculate_triangle_area(base: integer" in prompting.signature_lines(functions)


def scripted_model(replies: dict[str, str]) -> ThreadingHTTPServer:
    """A chat server that answers each conversation by its last message (the test's model)."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            last = body["messages"][-1]["content"]
            text = next((reply for key, reply in replies.items() if key in last), "Done.")
            choices = [{"message": {"role": "assistant", "content": text}}] * body["n"]
            data = json.dumps({"choices": choices}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


def test_the_reference_harness_runs_the_turns_against_the_backends(tmp_path) -> None:
    """A scripted model that answers each user turn with the possible answer's calls, and
    stops once it sees their results: the harness must execute them, carry the backends'
    state across turns, and write what the scorer accepts."""
    item = next(i for i in builder.category_items(builder.MULTI_TURN)
                if len(i["label"]["ground_truth"]) >= 3 and all(i["label"]["ground_truth"]))
    replies = {turn[-1]["content"]: "[" + ", ".join(calls) + "]"
               for turn, calls in zip(item["input"]["question"], truth_turns(item),
                                      strict=True)}
    single = builder.category_items("parallel")[0]
    replies[single["input"]["question"][0][-1]["content"]] = as_text(answer_calls(single))
    server = scripted_model(replies)
    pool = ThreadPoolExecutor(max_workers=1)
    pool.submit(server.serve_forever)
    try:
        materialize(TASK, tmp_path, components=("harness",))
        TASK.reference.apply_harness(tmp_path / "harness", TASK)
        inputs = tmp_path / "in.jsonl"
        inputs.write_text("".join(json.dumps({"id": f"val-{n}", "input": i["input"]}) + "\n"
                                  for n, i in enumerate((item, single))))
        subprocess.run([sys.executable, "run.py", "--inputs", str(inputs), "--out",
                        str(tmp_path / "out.jsonl"), "--base-url",
                        f"http://127.0.0.1:{server.server_address[1]}/v1"],
                       cwd=tmp_path / "harness", check=True, timeout=300)
    finally:
        server.shutdown()
        pool.shutdown()
    outputs = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    turns = json.loads(outputs[0]["output"])
    assert len(turns) == len(item["label"]["ground_truth"]) and all(turns)
    first_question = item["input"]["question"][0][-1]["content"]
    assert outputs[0]["trajectory"]["first"].startswith(first_question + "\n\nFunctions:\n")
    steps = outputs[0]["trajectory"]["steps"]
    assert all("results" in step for step in steps if step["calls"])
    assert not any(result.startswith("Error") for step in steps
                   for result in step.get("results", []))
    assert scorer.score(item, outputs[0]["output"]) == 1.0
    assert scorer.score(single, outputs[1]["output"]) == 1.0


# ------------------------------------------------------------------ end to end (slow)

@pytest.mark.slow
def test_the_initial_harness_runs_sandboxed_against_smol_and_bfcl_agrees() -> None:
    """SmolLM2-135M served for real, the initial harness in its bwrap sandbox, on three
    single-turn instances and the multi-turn one with the shortest documents (about eight
    minutes on two busy cores). Its real outputs get the same verdict from the scorer and
    from bfcl-eval's own evaluation."""
    from vtbench.evaluation.evaluate import evaluate
    from vtbench.models.smol import ensure_smol

    picked = [builder.category_items(c)[0] for c in ("simple_python", "parallel", "multiple")]
    picked.append(min(builder.category_items(builder.MULTI_TURN),
                      key=lambda i: len(json.dumps(i["input"]["functions"]))))
    items = [{"id": f"val-{n:05d}", **copy.deepcopy(i)} for n, i in enumerate(picked)]
    result = evaluate(TASK, ensure_smol(report=lambda line: None), "val", items=items,
                      standby=False)
    assert result.error is None and result.n == 4 and result.harness == "pristine"
    for item, instance in zip(items, result.instances, strict=True):
        assert instance.error is None and instance.output is not None
        decoded = json.loads(instance.output)
        if "involved_classes" in item["input"]:
            assert len(decoded) == len(item["label"]["ground_truth"])
            theirs = bfcl_accepts_multi(item, steps_as_text(decoded), "smol")
        else:
            theirs = bfcl_accepts_single(item, as_text(decoded))
        assert (instance.score == 1.0) == theirs
