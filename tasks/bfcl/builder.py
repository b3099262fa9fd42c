"""bfcl: call functions from their JSON-schema documents (BFCL v4; trusted task code).

Items are entries of five BFCL v4 categories, read from the operator-only ``bfcl-eval``
install (see ``bfcl_package``): ``simple_python``, ``multiple``, ``parallel``,
``parallel_multiple`` (one question, one answer of calls) and ``multi_turn_base`` (several
user turns, each answered by calls executed against stateful backends). The ``live_*``
categories are not used: the split machinery knows only ``val`` and ``test``.

An item's input is what BFCL shows a model at inference: the question (turns of messages),
the function documents with BFCL's Python-syntax hint appended to each description (as
``bfcl_eval.utils.add_language_specific_hint_to_function_doc`` does), and, for a
multi-turn entry, the backends' ``initial_config`` and ``involved_classes``. Its ground-
truth path and the other fields BFCL keeps from the model stay out. The label is what the
checkers read: BFCL's entry id, the category, the possible answer, the documents without
the hint (single-turn), and the possible-answer row as bfcl-eval ships it, so that the
leak audit finds that row, or a file or wheel holding it, anywhere in a sandbox.

Splits hold the same number of entries of each category (the score is the unweighted mean
of the five categories' accuracies; see scorer.py) and are disjoint from each other and
from the public training data by entry and by function name: :func:`build_split` skips
every entry that names a function already named by an excluded key (val's entries, when
test is drawn, and the public rows). Multi-turn entries share their classes' functions,
so the eight classes are cut in two fixed halves (:data:`MULTI_TURN_HALVES`, each with
enough entries that use only its classes); a split takes its multi-turn entries from the
first half, in an order drawn from ``rng``, none of whose functions is taken, and no
single-turn entry naming a method of the other half (some single-turn functions share a
backend method's name), which stays free for the next split.
"""

import copy
import json
import random
from functools import cache
from pathlib import Path
from typing import Any

from vtbench.tasks.fingerprints import is_specific
from vtbench.tasks.registry import import_file

HERE = Path(__file__).parent
package = import_file(HERE / "bfcl_package.py", "bfcl_package")

VERSION_PREFIX = "BFCL_v4"
SINGLE_TURN = ("simple_python", "multiple", "parallel", "parallel_multiple")
MULTI_TURN = "multi_turn_base"
CATEGORIES = (*SINGLE_TURN, MULTI_TURN)
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."
"""What BFCL appends to a Python function's description at inference
(``bfcl_eval.utils._get_language_specific_hint``)."""
MULTI_TURN_HALVES = (
    ("GorillaFileSystem", "MathAPI", "TwitterAPI", "VehicleControlAPI"),
    ("MessageAPI", "TicketAPI", "TradingBot", "TravelAPI"),
)
"""76 and 80 of the 200 multi_turn_base entries use only the classes of one half."""
INPUT_FIELDS = ("initial_config", "involved_classes")
"""Multi-turn fields a model sees besides the question and the documents."""


# ------------------------------------------------------------------ BFCL's entries

def read_rows(path: Path) -> list[tuple[dict, str]]:
    """Each JSON line of a bfcl-eval data file, parsed and as shipped."""
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    return [(json.loads(line), line) for line in lines]


@cache
def class_documents() -> dict[str, tuple[dict, ...]]:
    """The function documents of each multi-turn class, as BFCL's inference loads them."""
    config = package.module("constants.executable_backend_config")
    folder = package.data_dir() / "multi_turn_func_doc"
    names = {cls for half in MULTI_TURN_HALVES for cls in half}
    return {cls: tuple(row for row, _ in read_rows(folder / file))
            for cls, file in config.MULTI_TURN_FUNC_DOC_FILE_MAPPING.items() if cls in names}


def with_hint(functions: list[dict]) -> list[dict]:
    documents = copy.deepcopy(functions)
    for document in documents:
        document["description"] += PYTHON_HINT
    return documents


def make_item(category: str, entry: dict, answer: dict, answer_line: str) -> dict:
    """An item: the input a model sees, the label only the scorer reads."""
    if category == MULTI_TURN:
        functions = [dict(d) for cls in entry["involved_classes"]
                     for d in class_documents()[cls]]
    else:
        functions = entry["function"]
    instance_input: dict[str, Any] = {"question": entry["question"],
                                      "functions": with_hint(functions)}
    label: dict[str, Any] = {"id": entry["id"], "category": category,
                             "ground_truth": answer["ground_truth"],
                             "possible_answer": answer_line}
    if category == MULTI_TURN:
        instance_input.update({field: entry[field] for field in INPUT_FIELDS})
    else:
        label["functions"] = functions
    return {"input": instance_input, "label": label}


@cache
def category_items(category: str) -> tuple[dict, ...]:
    """Every entry of ``category`` as an item, in bfcl-eval's order."""
    data = package.data_dir()
    name = f"{VERSION_PREFIX}_{category}.json"
    entries = read_rows(data / name)
    answers = {row["id"]: (row, line) for row, line in read_rows(data / "possible_answer" / name)}
    return tuple(make_item(category, entry, *answers[entry["id"]]) for entry, _ in entries)


# ------------------------------------------------------------------ normalisation

def question_text(question: list) -> str:
    """The user messages of every turn, lower case, whitespace collapsed."""
    texts = [message.get("content", "") for turn in question for message in turn
             if isinstance(message, dict) and message.get("role") == "user"]
    return " ".join(" ".join(str(text).lower().split()) for text in texts)


def function_names(instance_input: dict) -> list[str]:
    return sorted({f["name"] for f in instance_input.get("functions", [])
                   if isinstance(f, dict) and isinstance(f.get("name"), str)})


def normalize(instance_input: dict) -> str:
    """The question's user text and the sorted names of the documented functions, as JSON
    (:func:`build_split` reads the names back to keep splits disjoint by function)."""
    return json.dumps({"functions": function_names(instance_input),
                       "question": question_text(instance_input.get("question", []))},
                      sort_keys=True)


def named_functions(keys: set[str]) -> set[str]:
    """Every function name that an excluded key names."""
    names: set[str] = set()
    for key in keys:
        try:
            value = json.loads(key)
        except ValueError:
            continue
        if isinstance(value, dict):
            names.update(value.get("functions", []))
    return names


@cache
def make_data() -> Any:
    return import_file(HERE / "make_data.py", "bfcl_make_data")


def row_input(row: dict) -> dict | None:
    """The instance input a public training row was made from (see ``make_data.row_input``)."""
    return make_data().row_input(row)


def fingerprint_strings(item: dict) -> list[str]:
    """What identifies an item in a file, for the leak audit: its user messages, the
    possible-answer row as shipped (which holds BFCL's id) and, multi-turn, the answer's
    calls, each where it is a span (``vtbench.tasks.fingerprints``). Not BFCL's id alone
    (``simple_python_12``) nor a call without spaces (``cd(folder='tmp')``): names. Not the
    function documents or the backends' initial state: their phrases ("the name of the
    city.", "the quick brown fox jumps over the lazy dog.") are in many installed packages,
    and the multi-turn tools are public."""
    question = item.get("input", {}).get("question", [])
    found = [message["content"] for turn in question for message in turn
             if message.get("role") == "user" and isinstance(message.get("content"), str)]
    label = item["label"]
    found.append(label["possible_answer"])
    if label["category"] == MULTI_TURN:
        found += [call for turn in label["ground_truth"] for call in turn]
    return [text for text in found if is_specific(text)]


# ------------------------------------------------------------------ splits

def draw(rng: random.Random, pool: list[dict], size: int, exclude: set[str],
         taken: set[str]) -> list[dict]:
    """``size`` items of ``pool`` in an order drawn from ``rng``, none excluded and none
    naming a taken function."""
    order = list(range(len(pool)))
    rng.shuffle(order)
    chosen: list[dict] = []
    for index in order:
        if len(chosen) == size:
            break
        item = pool[index]
        if normalize(item["input"]) in exclude or taken & set(function_names(item["input"])):
            continue
        chosen.append(item)
    return chosen


def half_functions(half: tuple[str, ...]) -> set[str]:
    return {d["name"] for cls in half for d in class_documents()[cls]}


def multi_turn_half(rng: random.Random, taken: set[str]) -> tuple[str, ...]:
    """The first half of the classes, in an order drawn from ``rng``, with no taken function."""
    for half in rng.sample(MULTI_TURN_HALVES, len(MULTI_TURN_HALVES)):
        if not half_functions(half) & taken:
            return half
    raise ValueError("bfcl: every half of the multi-turn classes names a function already "
                     "used by another split or the public data")


def draw_multi_turn(rng: random.Random, half: tuple[str, ...], size: int, exclude: set[str],
                    taken: set[str]) -> list[dict]:
    pool = [item for item in category_items(MULTI_TURN)
            if set(item["input"]["involved_classes"]) <= set(half)]
    return draw(rng, pool, size, exclude, taken)


def build_split(rng: random.Random, size: int, exclude: set[str]) -> list[dict]:
    """``size / 5`` items of each category, in an order drawn from ``rng``, disjoint from
    ``exclude`` by entry and by function name; their keys are then added to ``exclude``."""
    if size % len(CATEGORIES):
        raise ValueError(f"bfcl splits hold {len(CATEGORIES)} categories equally: "
                         f"{size} is not a multiple of {len(CATEGORIES)}")
    per_category = size // len(CATEGORIES)
    taken = named_functions(exclude)
    half = multi_turn_half(rng, taken)
    # Single-turn functions that share a name with another half's backend method would
    # leave that half to no later split.
    reserved = {name for other in MULTI_TURN_HALVES if other != half
                for name in half_functions(other)}
    items: list[dict] = []
    for category in SINGLE_TURN:
        items += draw(rng, list(category_items(category)), per_category, exclude,
                      taken | reserved)
    items += draw_multi_turn(rng, half, per_category, exclude, taken)
    if len(items) < size:
        raise ValueError(f"bfcl has only {len(items)} entries left for a split of {size}")
    rng.shuffle(items)
    exclude.update(normalize(item["input"]) for item in items)
    return copy.deepcopy(items)
