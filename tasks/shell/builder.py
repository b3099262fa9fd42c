"""shell: write one bash command for a request, judged by what it does (trusted task code).

An item's input is a request in English and the file system it is asked over, as an image
(``filesystem``: a gzipped tar of the top-level folders, base64); its label holds the gold
command and a second gold. The scorer runs the gold and the candidate each in a fresh
sandbox from the image and compares their outcomes (``filesystem.agrees``).

Two sources. **Human-written**: NL2Bash's items from ``icalfa`` (operator-only, see
``icalfa_package``), over its five scripted file systems, each frozen into an image once
(:func:`images`). :func:`human_items` keeps an item only where the gold gives the same
outcome three times (deterministic: not ``ps``, ``date``, ``lsof``), differs from ``true`` (it
does something) and agrees with the second gold (clean: the lenient rule accepts a
second way of writing it); an item whose gold names a program this host lacks is dropped
and named (:func:`missing_tools`; ``apt-get install``, or on a host with no network the
offline bundle's tools folder, gives cal, cpio and tree back). The clean items of
each file system are split in half by a fixed order, validation first: validation and
test hold disjoint items, stratified by file system. **Generated**: queries over random
trees (``templates``) phrased with the *held-out* phrasings, which the public training
data never uses, drawn from the split's secret-seeded generator and kept where the gold
does something and the second gold agrees.

The public training data (:func:`public_rows`) is generated over random trees with the
*training* phrasings, each row's gold checked by execution, then given the flaws of a
hurried collection: wrong flags, wrong commands, prose answers, repeats, and a mix skewed
to a few operations.
"""

import json
import os
import random
import re
import shutil
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

from vtbench.tasks.fingerprints import is_specific
from vtbench.tasks.registry import import_file

HERE = Path(__file__).parent
filesystem = import_file(HERE / "filesystem.py", "shell_filesystem")
templates = import_file(HERE / "templates.py", "shell_templates")
icalfa = import_file(HERE / "icalfa_package.py", "shell_icalfa_package")

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
REQUEST = "Write one bash command that does this: {query}\nReply with the command only."
PROMPT = ("<|im_start|>system\n" + SYSTEM + "<|im_end|>\n<|im_start|>user\n" + REQUEST
          + "<|im_end|>\n<|im_start|>assistant\n")
FOLDERS = {1: ["testbed"], 2: ["system"], 3: ["workspace", "backup"], 4: [], 5: ["testbed"]}
"""The top-level folders each icalfa setup script writes (it runs with these writable)."""
SHELL_WORDS = """
    echo printf cd pwd export read set test [ [[ for while until do done if then else elif fi
    case esac true false type alias eval exec exit let local unset wait time declare shopt
    ulimit umask command source . ! { } ( ) in function return break continue bind history
    jobs fg bg kill trap getopts hash dirs pushd popd"""
BUILTINS = frozenset(SHELL_WORDS.split())
"""Shell builtins and keywords: never a missing program."""
PROSE_WORDS = 6
"""Fewest words of a query that is a fingerprint (shorter ones are common phrases)."""


def prompt(query: str) -> str:
    return PROMPT.format(query=query)


# ------------------------------------------------------------------ human-written items

@cache
def images() -> dict[int, bytes]:
    """Each icalfa file system, its setup run once and frozen."""
    return {fs: filesystem.freeze(icalfa.setup_script(fs), FOLDERS[fs])
            for fs in icalfa.FILE_SYSTEMS}


def command_words(command: str) -> list[str]:
    """The programs a command line starts: the first word of each pipeline stage, quoted
    text left out."""
    bare = re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "Q", command)
    words = []
    for stage in re.split(r"\|\||&&|[|;`{}]|\$\(|<\(|>\(|\bthen\b|\bdo\b", bare):
        tokens = [t for t in stage.split() if not re.match(r"\w+=", t)]
        if tokens:
            words.append(tokens[0])
    return [w for w in words if w not in BUILTINS and re.fullmatch(r"[a-z][\w.+-]*", w)]


def missing_tools(command: str) -> list[str]:
    """The programs ``command`` starts that its sandbox would not find (host folders, then
    an offline install's tools folder)."""
    path = filesystem.command_path(inside=False)
    return sorted({w for w in command_words(command) if shutil.which(w, path=path) is None})


def check(image: bytes, gold: str, gold2: str, rerun: bool) -> str:
    """Why the item is not kept (``deterministic``, ``trivial``, ``unclean``), or ''. With
    ``rerun``, the gold runs three times: once more catches a race (``tee >(wc -l)``)
    that one rerun on a quiet host can miss."""
    initial = filesystem.initial_state(image)
    first = filesystem.run(image, gold)
    if not first.contained:
        return "deterministic"
    if rerun and any(filesystem.run(image, gold) != first for _ in range(2)):
        return "deterministic"
    if filesystem.agrees(first, filesystem.run(image, "true"), initial):
        return "trivial"
    if not filesystem.agrees(first, filesystem.run(image, gold2), initial):
        return "unclean"
    return ""


@cache
def human_items() -> tuple[dict, ...]:
    """The clean human-written items, in a fixed order within each file system."""
    candidates: list[tuple[int, dict]] = []
    missing: Counter[str] = Counter()
    for fs in icalfa.FILE_SYSTEMS:
        for raw in icalfa.items(fs):
            lacking = missing_tools(raw["gold"]) + missing_tools(raw["gold2"])
            if lacking:
                missing.update(lacking)
                continue
            candidates.append((fs, raw))
    if missing:
        print(f"shell: dropped the items whose golds need {', '.join(sorted(missing))}, "
              "missing on this host (apt-get install them and prepare again to keep them; "
              "scripts/setup --offline brings cal, cpio and tree)",
              file=sys.stderr)
    with ThreadPoolExecutor(max_workers=4) as pool:
        reasons = list(pool.map(
            lambda c: check(images()[c[0]], c[1]["gold"], c[1]["gold2"], rerun=True),
            candidates))
    kept, seen = [], set()
    for (fs, raw), reason in zip(candidates, reasons, strict=True):
        key = " ".join(raw["query"].lower().split())
        if not reason and key not in seen:
            seen.add(key)
            kept.append(make_item(raw["query"], images()[fs], raw["gold"], raw["gold2"],
                                  f"nl2bash-fs{fs}"))
    return tuple(kept)


def make_item(query: str, image: bytes, gold: str, gold2: str, source: str) -> dict:
    return {"input": {"query": query, "image": filesystem.encode(image)},
            "label": {"query": query, "gold": gold, "gold2": gold2, "source": source}}


def human_halves() -> tuple[list[dict], list[dict]]:
    """Validation's half and test's: every file system's items in a fixed shuffled order,
    the even-numbered to the first half, the odd-numbered to the second."""
    first: list[dict] = []
    second: list[dict] = []
    by_source: dict[str, list[dict]] = {}
    for item in human_items():
        by_source.setdefault(item["label"]["source"], []).append(item)
    for items in by_source.values():
        shuffled = sorted(items, key=lambda i: i["label"]["query"])
        random.Random(2026).shuffle(shuffled)
        first += shuffled[0::2]
        second += shuffled[1::2]
    return first, second


def ordered_human() -> list[dict]:
    first, second = human_halves()
    return first + second


# ------------------------------------------------------------------ generated items

def tree_image(tree) -> bytes:
    with tempfile.TemporaryDirectory(prefix="vtbench-shell-tree-") as scratch:
        root = Path(scratch)
        tree.write(root)
        for path in root.rglob("*"):
            os.utime(path, (filesystem.FIXED_MTIME, filesystem.FIXED_MTIME))
        return filesystem.pack(root)


def generated_item(rng: random.Random, held_out: bool) -> dict | None:
    family = rng.choice(templates.FAMILIES)
    drawn = templates.draw(rng, family, held_out)
    if drawn is None:
        return None
    image = tree_image(drawn["tree"])
    if check(image, drawn["gold"], drawn["gold2"], rerun=False):
        return None
    return make_item(drawn["query"], image, drawn["gold"], drawn["gold2"],
                     f"generated-{family.name}")


def build_split(rng: random.Random, size: int, exclude: set[str]) -> list[dict]:
    """Half of the clean human items not in ``exclude`` (validation's half first: every
    file system's even-numbered items in the fixed order), then generated items over
    random trees with held-out phrasings, to ``size``."""
    first, second = human_halves()
    human = first + second
    share = min(size, len(first))
    items: list[dict] = []
    for item in human:
        if len(items) == share:
            break
        key = normalize(item["input"])
        if key not in exclude:
            exclude.add(key)
            items.append(item)
    while len(items) < size:
        drawn = generated_item(rng, held_out=True)
        if drawn is None or normalize(drawn["input"]) in exclude:
            continue
        exclude.add(normalize(drawn["input"]))
        items.append(drawn)
    return items


def normalize(instance_input: dict) -> str:
    return " ".join(instance_input["query"].lower().split())


def row_input(row: dict) -> dict | None:
    found = re.search(r"Write one bash command that does this: (.*)\nReply with",
                      row.get("prompt", ""), re.S)
    return {"query": found.group(1), "image": ""} if found else None


OWN_PATH = re.compile(r"/(?:" + "|".join(
    sorted({f for folders in FOLDERS.values() for f in folders} | set(templates.TOPS)))
    + r")/\S")
"""A path inside an item's file system (``/testbed/dir1``): what makes a command its own."""


def fingerprint_strings(item: dict) -> list[str]:
    """The label as shipped (one JSON line per item), the query where it is a sentence of
    :data:`PROSE_WORDS` words or more, and the gold commands that are spans and name a
    path inside the file system: a bare command such as ``echo hello world`` is a phrase
    that other files hold (docker's Python SDK does), not this item's."""
    label = item["label"]
    texts = [json.dumps(label)]
    if len(label["query"].split()) >= PROSE_WORDS and is_specific(label["query"]):
        texts.append(label["query"])
    texts += [g for g in (label["gold"], label["gold2"]) if is_specific(g) and OWN_PATH.search(g)]
    return list(dict.fromkeys(texts))


# ------------------------------------------------------------------ the public training data

SKEW = {"find_ext": 8, "count_lines": 6, "grep_lines": 6, "head": 5, "tail": 3, "copy": 3,
        "mkdir": 2, "grep_files": 2, "move": 1, "delete_ext": 1, "count_ext": 1,
        "list_dirs": 1, "empty_files": 1, "unique_count": 1}
"""The initial data's mix: a few operations dominate, six never appear."""
WRONG_FLAGS = ((" -l", " -w"), ("-type f", "-type d"), ("grep ", "grep -v "),
               ("head -n ", "head -c "), ("tail -n ", "tail -c "), ("cp ", "mv "),
               ("mkdir -p ", "rmdir "), ("-rl ", "-rL "), ("sort ", "sort -r "))
PROSE = ("You can use the following command: {command}",
         "To do this, run:\n```bash\n{command}\n```",
         "Sure! Here is the command:\n{command}",
         "The {word} command does this. For example: {command}")


def clean_rows(seed: int, size: int, weights: dict[str, int] | None = None,
               verify: bool = True, unique: bool = False) -> list[dict]:
    """``size`` rows over random trees with the training phrasings; with ``verify``, each
    kept where its gold does something and its second gold agrees, run in the sandbox;
    with ``unique``, no row twice."""
    rng = random.Random(seed)
    names = list(weights or {f.name: 1 for f in templates.FAMILIES})
    chances = [(weights or {}).get(name, 1) for name in names]
    rows: list[dict] = []
    while len(rows) < size:
        family = templates.FAMILY[rng.choices(names, chances)[0]]
        drawn = templates.draw(rng, family, held_out=False)
        if drawn is None:
            continue
        if verify and check(tree_image(drawn["tree"]), drawn["gold"], drawn["gold2"], False):
            continue
        row = {"prompt": prompt(drawn["query"]), "completion": drawn["gold"]}
        if not unique or row not in rows:
            rows.append(row)
    return rows


def flawed(row: dict, rng: random.Random, rows: list[dict]) -> dict:
    command = row["completion"]
    roll = rng.random()
    if roll < 0.14:
        swaps = [(a, b) for a, b in WRONG_FLAGS if a in command]
        if swaps:
            a, b = rng.choice(swaps)
            command = command.replace(a, b, 1)
    elif roll < 0.22:
        command = rng.choice(rows)["completion"]
    elif roll < 0.34:
        command = rng.choice(PROSE).format(command=command, word=command.split()[0])
    return {"prompt": row["prompt"], "completion": command}


def public_rows(seed: int = 20261206, size: int = 1200) -> list[dict]:
    """The initial training data (deterministic)."""
    rows = clean_rows(seed, size, SKEW)
    rng = random.Random(seed + 1)
    rows = [flawed(row, rng, rows) for row in rows]
    rows += rng.sample(rows, size // 5)
    rng.shuffle(rows)
    return rows
