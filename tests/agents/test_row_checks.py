"""The row checks of the lightweight baselines: each known junk format is rewritten into the
harness's prompt format with the same content, each kind of label flaw the task's data has
is caught by checking the row against its own input, and on every tiny task's public data
the filter keeps no mislabelled row (judged by the task's trusted code) while keeping
nearly every correct one, except the rows of the systematic errors that arith, extract and
toolcalc carry so that only relabelling repairs them: those pass every check of a row against its
input, and the filter keeps them."""

import json
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from vtbench import layout
from vtbench.agents.filter_agent import filter_data
from vtbench.agents.row_checks import (
    Arith,
    Bfcl,
    Dsl,
    Extract,
    Humaneval,
    Shell,
    Toolcalc,
    load_interpreter,
    row_check,
)
from vtbench.tasks import find_task
from vtbench.tasks.registry import Task

TINY_TASKS = ("arith", "extract", "toolcalc", "dsl")


def dsl_check() -> Dsl:
    interpreter = load_interpreter(layout.BUILTIN_TASKS / "dsl" / "public" / "harness" / "dsl.py")
    assert interpreter is not None
    return Dsl(interpreter)


def test_arith_rewrites_the_short_prompt_and_drops_what_does_not_add_up() -> None:
    check, question = Arith(), "Sue has 8 shells. Sue buys 23 more and gives away 9. How many?"
    right = " 8+23=31. 31-9=22. Answer: 22"
    assert check.normalise((f"Q: {question}\nA:", right)) == (
        f"Question: {question}\nAnswer:", right)
    assert check.normalise((f"Question: {question}\nAnswer:".upper(), right)) is None
    assert check.normalise((f"Question: {question}\nAnswer:", " The answer is 22!!")) is None
    rows = [(f"Question: {question}\nAnswer:", completion) for completion in (
        right, " 8+23=31. 31-9=23. Answer: 23", " 8+23=31. 31-9=22. Answer: 21",
        " 8+24=32. 32-9=23. Answer: 23", " 8+23=31. 31-9=-1. Answer: -1")]
    assert check.consistent(rows) == [True, False, False, False, False]


def test_extract_rewrites_every_junk_format_into_the_same_json_object() -> None:
    check, text = Extract(), "Greta Hansen, 41, works as a florist in Ghent."
    want = (f"Text: {text}\nJSON:",
            ' {"name": "Greta Hansen", "age": 41, "city": "Ghent", "job": "florist"}')
    for prompt, completion in (
            (f"Sentence: {text}\nOutput:", want[1]),
            (want[0], " {'name': 'Greta Hansen', 'age': 41, 'city': 'Ghent', 'job': 'florist'}"),
            (want[0], ' {"name": "Greta Hansen", "age": "41", "city": "Ghent", "job": "florist"}'
                      " // ok"),
            (want[0], ' Result: {"name": "Greta Hansen", "age": 41, "city": "Ghent", '
                      '"job": "florist"}')):
        assert check.normalise((prompt, completion)) == want
    assert check.normalise((want[0], " name: Greta Hansen")) is None


def test_extract_drops_wrong_invented_partial_and_missing_fields() -> None:
    check = Extract()
    full = "Greta Hansen, 41, works as a florist in Ghent."
    rows = [(f"Text: {text}\nJSON:", " " + json.dumps(label)) for text, label in (
        (full, {"name": "Greta Hansen", "age": 41, "city": "Ghent", "job": "florist"}),
        (full, {"name": "Greta Hansen", "age": 42, "city": "Ghent", "job": "florist"}),
        (full, {"name": "Greta Hansen", "age": 41, "city": "Basel", "job": "florist"}),
        (full, {"name": "Greta", "age": 41, "city": "Ghent", "job": "florist"}),
        (full, {"name": "Greta Hansen", "age": 41, "job": "florist"}),
        (full, {"name": "Greta Hansen", "city": "Ghent", "job": "florist"}),
        ("Our new florist is Greta Hansen.", {"name": "Greta Hansen", "job": "florist",
                                             "city": "Ghent"}),
        ("Our new florist is Greta Hansen.", {"name": "Greta Hansen", "job": "florist"}))]
    assert check.consistent(rows) == [True, False, False, False, False, False, False, True]


def test_toolcalc_rewrites_spaced_calculator_lines_and_other_answer_words() -> None:
    check, prompt = Toolcalc(), "Question: 21 boxes hold 909 pens each and 726 more are loose.\n"
    want = (prompt, "Calc: 909*21+726=19815\nAnswer: 19815")
    for completion in ("Calc: 909 x 21 + 726 = 19815\nAnswer: 19815",
                       "Calc: 909*21+726=19815\nThe answer is 19815.",
                       "Calc: 909*21+726=19815\nanswer= 19815"):
        assert check.normalise((prompt, completion)) == want
    assert check.normalise((prompt.replace("Question: ", "Q: "), want[1])) == want


def test_toolcalc_drops_wrong_results_wrong_operations_and_unchecked_answers() -> None:
    check = Toolcalc()
    rows = [("Question: What is 47 times 83?\n", "Calc: 47*83=3901\nAnswer: 3901"),
            ("Question: What is 47 times 83?\n", "Calc: 47*83=3900\nAnswer: 3900"),
            ("Question: What is 47 times 83?\n", "Calc: 47+83=130\nAnswer: 130"),
            ("Question: What is 47 times 83?\n", "Calc: 47*83=3901\nAnswer: 3900"),
            ("Question: What is 47 times 83?\n", "Answer: 3901"),
            ("Question: What is 136 plus 561?\n", "Calc: 136*561=76296\nAnswer: 76296"),
            ("Question: A farm picked 136, 561 and 884 apples on 3 days. How many in total?\n",
             "Calc: 136+561+884=1581\nAnswer: 1581"),
            ("Question: What is 47 times 83?\n", "Calc: 47*84=3948\nAnswer: 3948")]
    assert check.consistent(rows) == [True, False, False, False, False, False, True, False]


HYPOT = {"name": "math.hypot", "description": "Return the Euclidean distance.",
         "parameters": {"type": "dict", "properties": {"x": {"type": "float"},
                                                       "y": {"type": "float"},
                                                       "label": {"type": "string"}},
                        "required": ["x", "y"]}}


def chat_prompt(question: str, functions: str) -> str:
    return (f"<|im_start|>system\nYou are SmolLM<|im_end|>\n<|im_start|>user\n{question}"
            f"\n\nFunctions:\n{functions}<|im_end|>\n<|im_start|>assistant\n")


def test_bfcl_keeps_the_list_of_calls_alone_and_drops_rows_that_list_python_signatures(
        ) -> None:
    check, calls = Bfcl(), "[math.hypot(x=3, y=4.5)]"
    prompt = chat_prompt("How far is (3, 4.5)?", json.dumps([HYPOT]))
    for completion in (calls, f"```python\n{calls}\n```",
                       f"Sure! Here is the function call you need:\n{calls}",
                       f"{calls}<|im_end|>\n<|im_start|>assistant\n{calls}",
                       f"<|im_start|>assistant\n{calls}"):
        assert check.normalise((prompt, completion)) == (prompt, calls)
    assert check.normalise((prompt, "The distance is 5.4.")) is None
    signatures = chat_prompt("How far is (3, 4.5)?", "math.hypot(*coordinates)\n    Return it.")
    assert check.normalise((signatures, calls)) is None


def test_bfcl_drops_strings_for_numbers_unlisted_functions_missing_arguments_and_lone_calls(
        ) -> None:
    check, prompt = Bfcl(), chat_prompt("How far is (3, 4.5)?", json.dumps([HYPOT]))
    again = chat_prompt("How far is (3, 4.5)? Do the same for x = 1 and y = 2.",
                        json.dumps([HYPOT]))
    rows = [(prompt, "[math.hypot(x=3, y=4.5, label='a')]"),
            (prompt, "[math.hypot(x='3', y=4.5)]"),
            (prompt, "[math.dist(x=3, y=4.5)]"),
            (prompt, "[math.hypot(x=3)]"),
            (prompt, "[math.hypot(x=3, y=4.5, z=1)]"),
            (prompt, "[math.hypot(x=True, y=4.5)]"),
            (again, "[math.hypot(x=3, y=4.5)]"),
            (again, "[math.hypot(x=3, y=4.5), math.hypot(x=1, y=2)]")]
    assert check.consistent(rows) == [True, False, False, False, False, False, False, True]


def test_on_bfcls_public_data_the_filter_keeps_only_documented_calls_of_listed_functions(
        tmp_path: Path) -> None:
    pack = find_task("bfcl")
    shutil.copytree(pack.root / "public" / "harness", tmp_path / "harness")
    data = shutil.copytree(pack.root / "public" / "data", tmp_path / "data")
    check = row_check(tmp_path)
    assert isinstance(check, Bfcl)
    counts = filter_data(data, check)
    rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    assert len(rows) == counts.kept >= 800 and counts.off_format >= 600
    for row in rows:
        listed = json.loads(row["prompt"].partition("\n\nFunctions:\n")[2].partition(
            "<|im_end|>")[0])
        called = {name for name, _ in check.calls(row["completion"]) or []}
        assert called and called <= {document["name"] for document in listed}
        assert not re.search(r"=\s*'\d+(\.\d+)?'", row["completion"])
    again = filter_data(data, row_check(tmp_path))
    assert (again.dropped, again.rewritten) == (0, 0)


def shell_prompt(query: str) -> str:
    return ("<|im_start|>system\nYou are SmolLM<|im_end|>\n<|im_start|>user\nWrite one bash "
            f"command that does this: {query}\nReply with the command only.<|im_end|>\n"
            "<|im_start|>assistant\n")


def test_shell_keeps_the_command_alone_out_of_the_prose_around_it() -> None:
    check, prompt = Shell(), shell_prompt("Show the top 3 lines of /data/a/notes.txt")
    command = "head -n 3 /data/a/notes.txt"
    for completion in (command, f"You can use the following command: {command}",
                       f"To do this, run:\n```bash\n{command}\n```",
                       f"Sure! Here is the command:\n{command}",
                       f"The head command does this. For example: {command}"):
        assert check.normalise((prompt, completion)) == (prompt, command)
    assert check.normalise(("Question: 1+1\nAnswer:", command)) is None


def test_shell_drops_commands_that_name_other_files_or_other_numbers() -> None:
    check = Shell()
    prompt = shell_prompt("Show the top 3 lines of /data/a/notes.txt")
    folder = shell_prompt("Create a directory named kestrel inside /data/orbit")
    rows = [(prompt, "head -n 3 /data/a/notes.txt"),
            (prompt, "head -n 5 /data/a/notes.txt"),
            (prompt, "wc -l < /files/wren/maple.txt"),
            (prompt, "head -n 3 '/data/a/notes.txt"),
            (folder, "mkdir -p /data/orbit/kestrel"),
            (folder, "find /data/orbit -mindepth 1 -type d")]
    assert check.consistent(rows) == [True, False, False, False, True, True]


def test_on_shells_data_the_filter_keeps_every_true_command_and_drops_other_rows_commands(
        tmp_path: Path) -> None:
    pack = find_task("shell")
    true_rows = pack.builder.clean_rows(7, 400, verify=False)
    assert Shell().consistent([(r["prompt"], r["completion"]) for r in true_rows]) == \
        [True] * len(true_rows)
    shutil.copytree(pack.root / "public" / "harness", tmp_path / "harness")
    data = shutil.copytree(pack.root / "public" / "data", tmp_path / "data")
    check = row_check(tmp_path)
    assert isinstance(check, Shell)
    counts = filter_data(data, check)
    assert counts.kept >= 1000 and counts.mislabelled >= 100 and counts.rewritten >= 100
    again = filter_data(data, row_check(tmp_path))
    assert (again.dropped, again.rewritten) == (0, 0)


def test_humaneval_restores_four_space_indents_and_drops_stubs_and_bodies_of_other_functions(
        ) -> None:
    check, prompt = Humaneval(), 'def area(width, height):\n    """The area."""\n'
    body = "    if width < 0:\n        return 0\n    return width * height\n"
    for written in (body, body.replace("    ", "\t"), body.replace("    ", "  ")):
        assert check.normalise((prompt, written)) == (prompt, body)
    assert check.normalise((prompt, "    return (\n")) is None
    rows = [(prompt, body), (prompt, "    pass\n"), (prompt, "    ...\n"),
            (prompt, "    raise NotImplementedError\n"),
            (prompt, "    return sorted(items, key=key)\n"),
            ("def now(self):\n    \"\"\"The time.\"\"\"\n", "    return time.time()\n")]
    assert check.consistent(rows) == [True, False, False, False, False, True]


@pytest.mark.slow
def test_on_humanevals_data_the_filter_keeps_its_true_bodies_and_few_of_other_functions(
        tmp_path: Path) -> None:
    """Judged by the mined pool: a kept row's body is mostly its prompt's own (a body of
    another function that reads a parameter of the same name passes); stubs never are."""
    pack = find_task("humaneval")
    own = {f["prompt"]: f["completion"] for f in pack.builder.mined_pool()}
    shutil.copytree(pack.root / "public" / "harness", tmp_path / "harness")
    data = shutil.copytree(pack.root / "public" / "data", tmp_path / "data")
    given = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    true_prompts = {r["prompt"] for r in given if own[r["prompt"]] == r["completion"]
                    and not pack.builder.is_stub(r["completion"])}
    check = row_check(tmp_path)
    assert isinstance(check, Humaneval)
    counts = filter_data(data, check)
    kept = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    assert counts.kept == len(kept) and counts.rewritten >= 50
    truly = sum(own[r["prompt"]] == r["completion"] for r in kept)
    assert truly >= 0.95 * len(true_prompts) and truly >= 0.8 * len(kept)
    assert not any(pack.builder.is_stub(r["completion"]) for r in kept)


def test_dsl_rewrites_programs_into_the_documented_syntax_and_runs_them_on_the_examples(
        ) -> None:
    check = dsl_check()
    prompt = "in: abcd out: DCBAkqvz\nin: kite out: ETIKkqvz\nprogram:"
    for completion in (" reverse | upper | append kqvz", " REVERSE | UPPER | APPEND KQVZ",
                       " reverse, upper, append kqvz"):
        assert check.normalise((prompt, completion)) == (prompt, " reverse | upper | append kqvz")
    assert check.normalise(("no examples here", " upper")) is None
    rows = [(prompt, " reverse | upper | append kqvz"), (prompt, " upper | append kqvz"),
            (prompt, " reverse | upper | append")]
    assert check.consistent(rows) == [True, False, False]


@pytest.mark.parametrize("task", TINY_TASKS)
def test_each_check_rewrites_into_the_prompt_its_task_harness_uses(task: str) -> None:
    pack = find_task(task)
    settings = [tomllib.loads((pack.root / source / "harness.toml").read_text())
                for source in pack.spec.components.harness.sources
                if (pack.root / source / "harness.toml").exists()]
    check = row_check(pack.root / "public")
    assert check is not None and settings[-1]["prompt"] == check.prompt


def test_checking_dsl_rows_writes_nothing_into_the_harness(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as in a sandbox's Python
    harness = shutil.copytree(layout.BUILTIN_TASKS / "dsl" / "public" / "harness",
                              tmp_path / "harness")
    before = sorted(p.relative_to(harness) for p in harness.rglob("*"))
    check = row_check(tmp_path)
    assert check is not None
    assert check.consistent([("in: ab out: ABkqvz\nprogram:", " upper | append kqvz")]) == [True]
    assert sorted(p.relative_to(harness) for p in harness.rglob("*")) == before


def test_a_task_without_a_check_gets_none_and_so_only_generic_filtering(
        tmp_path: Path) -> None:
    assert row_check(tmp_path) is None  # no harness at all
    shutil.copytree(layout.BUILTIN_TASKS / "repofix" / "public" / "harness", tmp_path / "harness")
    assert row_check(tmp_path) is None
    shutil.rmtree(tmp_path / "harness")
    harness = shutil.copytree(layout.BUILTIN_TASKS / "dsl" / "public" / "harness",
                              tmp_path / "harness")
    (harness / "dsl.py").unlink()
    assert row_check(tmp_path) is None  # no harness/dsl.py to run programs with


@pytest.mark.parametrize("task", TINY_TASKS)
def test_a_copy_of_a_pack_under_another_id_gets_its_tasks_check(task: str, tmp_path: Path) -> None:
    """The check follows the harness the workspace holds, not the task's id: a variant of a
    pack (``dsl-t2``) gets the same lightweight baselines as the pack."""
    copy = shutil.copytree(layout.BUILTIN_TASKS / task, tmp_path / f"{task}-variant")
    expected = {"arith": Arith, "extract": Extract, "toolcalc": Toolcalc, "dsl": Dsl}[task]
    assert isinstance(row_check(copy / "public"), expected)


def truth(task: Task, row: dict) -> bool | None:
    """Whether a kept row's label is the true one, by the task's trusted code; None for a
    row of the task's systematic error (arith: a lost-and-found problem worked as if the
    found things were lost; extract: city and job swapped; toolcalc: an offset forgotten,
    a count of days added)."""
    builder, found = task.builder, task.builder.row_input(row)
    if task.id == "arith":
        if task.reference.worked_answer(found["question"]) == row["completion"]:
            return True
        return None if mis_worked(task, found["question"]) == row["completion"] else False
    if task.id == "extract":
        true, label = builder.true_label(found["text"]), json.loads(row["completion"])
        if label == true:
            return True
        return None if label == builder.swapped(true) != true else False
    if task.id == "toolcalc":
        expression = builder.true_expression(found["question"])
        if row["completion"] == calculated(builder, expression):
            return True
        slip = builder.slipped_expression(found["question"], expression)
        return None if slip and row["completion"] == calculated(builder, slip) else False
    program = row["completion"].strip()
    return all(builder.dsl.run(program, a) == b for a, b in found["examples"])


def calculated(builder, expression: str) -> str:
    result = builder.evaluate_expression(expression)
    return f"Calc: {expression}={result}\nAnswer: {result}"


def mis_worked(task: Task, question: str) -> str | None:
    """The worked answer of arith's systematic error for a lost-and-found question."""
    found = task.reference.PATTERNS[2][0].search(question)
    if found is None:
        return None
    a, b, c = map(int, found.groups())
    return f" {a}-{b}={a - b}. {a - b}-{c}={a - b - c}. Answer: {a - b - c}"


@pytest.mark.parametrize(("task", "least", "systematic", "unseen"), [
    ("arith", 900, (300, 400), 0), ("extract", 950, (950, 1000), 5),
    ("toolcalc", 600, (320, 360), 0), ("dsl", 1150, (0, 0), 0)])
def test_on_every_tiny_task_the_filter_keeps_only_true_labels_or_the_systematic_error(
        task: str, least: int, systematic: tuple[int, int], unseen: int,
        tmp_path: Path) -> None:
    """``unseen``: extract's random label noise on top of the swap can also put a city into
    both fields, which every value check passes."""
    pack = find_task(task)
    shutil.copytree(pack.root / "public" / "harness", tmp_path / "harness")
    data = shutil.copytree(pack.root / "public" / "data", tmp_path / "data")
    given = {pack.builder.normalize(pack.builder.row_input(json.loads(line)))
             for line in (data / "train.jsonl").read_text().splitlines()}
    counts = filter_data(data, row_check(tmp_path))
    rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    assert len(rows) == counts.kept >= least
    verdicts = [truth(pack, row) for row in rows]
    assert verdicts.count(False) <= unseen
    assert systematic[0] <= verdicts.count(None) <= systematic[1]
    assert {pack.builder.normalize(pack.builder.row_input(row)) for row in rows} <= given
    assert len({row["prompt"] for row in rows}) == len(rows)
    again = filter_data(data, row_check(tmp_path))
    assert (again.dropped, again.rewritten) == (0, 0)
