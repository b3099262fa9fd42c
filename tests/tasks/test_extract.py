import json
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.tasks.helpers import reference_rows
from tests.tasks.test_toolcalc import CompletionServer
from vtbench.tasks import find_task
from vtbench.tasks.materialize import materialize

TASK = find_task("extract")
BUILDER, SCORER, REFERENCE = TASK.builder, TASK.scorer, TASK.reference
LABEL = {"name": "Greta Hansen", "age": 41, "city": "Ghent", "job": "florist"}


def score(output: str, label: dict = LABEL) -> float:
    return SCORER.score({"input": {"text": "..."}, "label": label}, output)


def template_of(text: str) -> int:
    matches = [i for i, t in enumerate(BUILDER.TEMPLATES)
               if BUILDER._template_regex(t.pattern).fullmatch(text)]
    assert len(matches) == 1, f"{text!r} fits templates {matches}"
    return matches[0]


def test_an_exact_prediction_scores_one() -> None:
    assert score(json.dumps(LABEL)) == 1.0
    assert score(json.dumps(dict(reversed(LABEL.items())))) == 1.0


def test_one_wrong_value_costs_precision_and_recall() -> None:
    assert score(json.dumps({**LABEL, "city": "Basel"})) == pytest.approx(0.75)


def test_a_missing_field_costs_recall_only() -> None:
    predicted = {k: v for k, v in LABEL.items() if k != "job"}
    assert score(json.dumps(predicted)) == pytest.approx(2 * 1 * 0.75 / 1.75)


def test_an_invented_field_costs_precision_only() -> None:
    label = {"name": "Nils Wolff", "city": "Riga"}
    predicted = {**label, "age": 30}
    assert score(json.dumps(predicted), label) == pytest.approx(2 * (2 / 3) / (5 / 3))


def test_values_compare_ignoring_case_spaces_and_number_type() -> None:
    predicted = {"name": " greta  HANSEN ", "age": "41", "city": "ghent", "job": "Florist"}
    assert score(json.dumps(predicted)) == 1.0
    assert score('{"name": "Greta Hansen", "age": 41.0, "city": "Ghent", "job": "florist"}') \
        == 1.0


def test_keys_must_match_exactly() -> None:
    assert score(json.dumps({k.capitalize(): v for k, v in LABEL.items()})) == 0.0


@pytest.mark.parametrize("output", [
    "", "{", "{'name': 'Greta Hansen', 'age': 41}", '{"name": "Greta Hansen", "age": 41',
    '{"name": "Greta Hansen"} // ok', 'Result: {"name": "Greta Hansen"}', '["Greta Hansen"]',
    "null", "41", '"Greta Hansen"', "[" * 100000,
])
def test_output_that_is_not_one_json_object_scores_zero(output: str) -> None:
    assert score(output) == 0.0


def test_nested_and_non_scalar_values_never_match() -> None:
    label = {"name": "Vera Nowak", "age": 30}
    assert score('{"name": ["Vera Nowak"], "age": {"v": 30}}', label) == 0.0
    assert score('{"name": "Vera Nowak", "age": null}', label) == pytest.approx(0.5)


def test_an_empty_object_scores_zero_against_a_label() -> None:
    assert score("{}") == 0.0


def test_true_label_reads_every_generated_sentence_back() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        person = BUILDER.make_person(rng)
        assert BUILDER.true_label(person["text"]) == person["label"]
        template_of(person["text"])


def test_labels_state_only_what_the_sentence_says() -> None:
    items = BUILDER.build_split(random.Random(5), 400, set())
    assert {len(item["label"]) for item in items} == {2, 3, 4}
    for item in items:
        text = item["input"]["text"]
        assert all(str(value) in text for value in item["label"].values())
        assert not ({"Text:", "JSON", "{"} & set(text.split()))


def test_splits_use_every_template_and_the_public_data_is_shifted() -> None:
    split = Counter(template_of(item["input"]["text"])
                    for item in BUILDER.build_split(random.Random(9), 400, set()))
    public = Counter(template_of(BUILDER.row_input(row)["text"])
                     for row in BUILDER.public_rows())
    assert set(split) == set(range(len(BUILDER.TEMPLATES)))
    rare = range(5, len(BUILDER.TEMPLATES))
    assert sum(split[i] for i in rare) / 400 > 0.3
    assert sum(public[i] for i in rare) / public.total() < 0.1


def parsed_completion(row: dict) -> dict | None:
    try:
        value = json.loads(row["completion"])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def test_the_public_data_has_wrong_labels_junk_and_duplicates() -> None:
    rows = BUILDER.public_rows()
    parsed = [(row, parsed_completion(row)) for row in rows]
    usable = [(row, label) for row, label in parsed if label is not None]
    wrong = sum(label != BUILDER.swapped(BUILDER.true_label(BUILDER.row_input(row)["text"]))
                for row, label in usable)
    assert 0.12 < wrong / len(usable) < 0.3
    assert 0.05 < 1 - len(usable) / len(rows) < 0.2
    assert any(not row["prompt"].startswith("Text: ") for row in rows)
    assert len({json.dumps(row) for row in rows}) < len(rows) * 0.9


def test_reference_data_has_true_labels_in_the_harness_format(tmp_path: Path) -> None:
    rows = reference_rows(TASK, tmp_path)
    for row in rows:
        text = BUILDER.row_input(row)["text"]
        assert row["prompt"] == BUILDER.PROMPT.format(text=text)
        assert row["completion"] == " " + json.dumps(BUILDER.true_label(text))
        assert len(row["prompt"]) + len(row["completion"]) + 2 <= 192


def test_every_public_row_naming_a_city_and_a_job_has_the_two_swapped() -> None:
    both = [row for row in BUILDER.public_rows()
            if {"city", "job"} <= set(BUILDER.true_label(BUILDER.row_input(row)["text"]))
            and (label := parsed_completion(row)) and label.keys() >= {"city", "job"}]
    assert len(both) > 500
    for row in both:
        label = json.loads(row["completion"])
        assert label["city"] in BUILDER.JOBS or label["job"] in BUILDER.CITIES


def test_reference_data_keeps_every_sentence_once_and_adds_the_missing_patterns(
        tmp_path: Path) -> None:
    rows = reference_rows(TASK, tmp_path)
    keys = [BUILDER.normalize(BUILDER.row_input(row)) for row in rows]
    assert len(set(keys)) == len(keys)
    initial = {BUILDER.normalize(BUILDER.row_input(row)) for row in BUILDER.public_rows()}
    assert set(keys) >= initial
    templates = Counter(template_of(BUILDER.row_input(row)["text"]) for row in rows)
    public = Counter(template_of(BUILDER.row_input(row)["text"])
                     for row in BUILDER.public_rows())
    assert set(templates) == set(range(len(BUILDER.TEMPLATES))) != set(public)
    assert min(templates.values()) == REFERENCE.LEAST_PER_PATTERN


def test_reference_parser_agrees_with_the_builder() -> None:
    rng = random.Random(11)
    for _ in range(2000):
        person = BUILDER.make_person(rng)
        assert REFERENCE.parse_sentence(person["text"]) == person["label"]


def test_the_longest_possible_answer_fits_the_fixed_decoding_budget() -> None:
    longest = {"name": f"{max(BUILDER.FIRST_NAMES, key=len)} {max(BUILDER.LAST_NAMES, key=len)}",
               "age": BUILDER.AGES[1], "city": max(BUILDER.CITIES, key=len),
               "job": max(BUILDER.JOBS, key=len)}
    decoding = TASK.spec.components.harness.decoding
    assert len(" " + json.dumps(longest)) <= decoding.max_tokens - 8


def copying_model(prompt: str) -> str:
    """Answers with the true label (what a perfect model writes after "JSON:")."""
    text = re.fullmatch(r"Text: (.+)\nJSON:", prompt, re.S).group(1)
    return " " + json.dumps(BUILDER.true_label(text)) + "\nText: more"


def test_the_fixed_harness_turns_a_correct_model_into_full_marks(tmp_path: Path) -> None:
    materialize(TASK, tmp_path, components=("harness",))
    items = [{"id": f"val-{i:05d}", **item}
             for i, item in enumerate(BUILDER.build_split(random.Random(2), 20, set()))]
    inputs, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inputs.write_text("".join(json.dumps({"id": i["id"], "input": i["input"]}) + "\n"
                              for i in items))
    decoding = TASK.spec.components.harness.decoding.model_dump_json()
    with CompletionServer(copying_model) as server:
        subprocess.run([sys.executable, "run.py", "--inputs", str(inputs), "--base-url",
                        server.base_url, "--out", str(out), "--decoding", decoding],
                       cwd=tmp_path / "harness", check=True, timeout=60)
    assert not server.errors
    outputs = {r["id"]: r["output"] for r in map(json.loads, out.read_text().splitlines())}
    assert [SCORER.score(item, outputs[item["id"]]) for item in items] == [1.0] * len(items)
