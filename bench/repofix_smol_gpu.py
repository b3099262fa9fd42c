"""Does a smol repofix exist? Fine-tune SmolLM2-135M on generated repairs, then pass@k.

For a GPU host (the issue's item 6); nothing here runs in the default tests.

1. pairs: every training library (``tasks/repofix/libraries/libraries.toml``) and every
   pair library (``pairs.toml``: training data only, fetched from PyPI by hash with
   ``--fetch``) is mutated with the per-function cap and the mutant budget lifted
   (``--mutants`` per library);
   each kept instance becomes one row in the reference harness's format: the transcript
   (issue, the function found and shown with line numbers) as the prompt, the ``edit``
   that restores the function as the completion;
2. training: the trl trainer of repofix-smol (``tasks/_hf/trainer``) from SmolLM2-135M,
   completion-only loss, cosine schedule, rows of up to 2,048 tokens;
3. pass@k: the base and the tuned model, each served by our server, on ``--val``
   instances of the val split's libraries: ``--k`` sampled edits per instance, each
   applied to the instance's tree and scored by the task's scorer (the restored suite in
   bwrap); pass@k by the unbiased estimator.

    python bench/repofix_smol_gpu.py --out /tmp/repofix-gpu [--mutants 3000] [--steps 2000]
        [--val 100] [--k 8] [--device cuda] [--flips] [--pairs-only | --pairs TRAIN_JSONL]
    python bench/repofix_smol_gpu.py --fetch

``--fetch`` downloads the pair libraries' sdists into the generated cache
(``$VTBENCH_GENERATED/generated/repofix/sdists``), each checked against its pinned
sha256, and stops: on a host with no network, copy that folder there first.

``--flips`` makes pairs from the reversible modifiers' mutants as well (operator flips,
inverted conditions, constants moved by one: ``tasks/repofix/lib/flips.py``; never a task
instance). ``--pairs-only`` stops after step 1 (the pairs need CPU cores only, and can be made on
another host); ``--pairs`` starts at step 2 with pairs made so. Every stage keeps what it
made under ``--out`` (the pairs per library, ``tuned/``, ``val-N.json``, each model's
``pass-NAME.json``), so a run stopped anywhere goes on where it stopped.

Expected on one H100 with 16 cores (not yet run): pairs 20-40 min (suites on 16
processes), training of 2,000 steps about 15 min, sampling 100 x 8 edits about 5 min per
model, scoring about 800 suites x 2 models at 16 in parallel about 10 min: about 1-1.5 h.
The three training libraries alone gave 177 irreversible pairs (bench/RESULTS.md); with
the 41 pair libraries (67,342 sites, irreversible and reversible) and the kept rates seen
so far (about one irreversible mutant in five, one reversible in three) the order is 10^4.
Pairs take one process per library (``--workers``); ``--mutants`` caps each library.
"""

import argparse
import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from pathlib import Path

import tomli_w

from vtbench.tasks.registry import import_file
from vtbench.tasks.store import atomic_write

ROOT = Path(__file__).resolve().parent.parent
REPOFIX = ROOT / "tasks" / "repofix"
sys.path[:0] = [str(REPOFIX / "reference_harness"), str(REPOFIX / "public" / "harness")]


def builder():
    return import_file(REPOFIX / "builder.py", "repofix_gpu_builder")


def library_pairs(name: str, mutants: int, flips: bool) -> list[dict]:
    """One library's rows (run in a worker process, one mutant at a time: the libraries
    share the cores); with ``flips``, from the reversible modifiers' mutants too
    (``lib/flips.py``)."""
    build = builder()
    instances, libraries = build._module("instances"), build._module("libraries")
    instances.PER_FUNCTION = 10**6
    irreversible, reversible = build._module("mutants").mutants, build._module("flips").flips
    data = import_file(REPOFIX / "make_data.py", "repofix_gpu_make_data")
    rows = []
    found = instances.generate(
        libraries.library(name), max_mutants=mutants, workers=1,
        modifier=(lambda source: irreversible(source) + reversible(source)) if flips
        else irreversible)
    for label in found:
        rows += [row for row in data.trajectory(label, data.REFERENCE, random.Random(0))
                 if row["completion"].startswith("edit ")]
    return rows


def pair_sources() -> list[str]:
    """The libraries pairs come from: the task's training libraries and the pair libraries."""
    libraries = builder()._module("libraries")
    return [lib.name for lib in [*libraries.libraries("training"), *libraries.pair_libraries()]]


def fetch_pair_libraries() -> None:
    libraries = builder()._module("libraries")
    for lib in libraries.pair_libraries():
        print(f"{lib.name}: {libraries.fetch(lib)}", flush=True)


def make_pairs(out: Path, mutants: int, flips: bool, workers: int | None) -> Path:
    """Every source library's rows in ``out/pairs/NAME.jsonl``, written as each library
    ends (a library whose file exists is not made again: a stopped run goes on where it
    stopped), then all of them in ``out/data/train.jsonl``."""
    folder = out / "pairs"
    folder.mkdir(parents=True, exist_ok=True)
    names = pair_sources()
    todo = [name for name in names if not (folder / f"{name}.jsonl").is_file()]
    with ProcessPoolExecutor(workers) as pool:
        running = {pool.submit(library_pairs, name, mutants, flips): name for name in todo}
        for done in as_completed(running):
            rows = done.result()
            atomic_write(folder / f"{running[done]}.jsonl",
                         "".join(json.dumps(r) + "\n" for r in rows), mode=0o644)
            print(json.dumps({"library": running[done], "pairs": len(rows)}), flush=True)
    found = {name: (folder / f"{name}.jsonl").read_text() for name in names}
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "train.jsonl").write_text("".join(found.values()))
    print(json.dumps({"pairs": sum(text.count("\n") for text in found.values()),
                      "per_library": {name: text.count("\n") for name, text in found.items()}}),
          flush=True)
    return data


def train(out: Path, data: Path, base: Path, steps: int) -> Path:
    """``out/tuned``, trained unless a run before this one trained it."""
    model = out / "tuned"
    if (model / "train_log.json").is_file():
        print(f"kept {model}: trained by an earlier run", flush=True)
        return model
    trainer = out / "trainer"
    shutil.copytree(ROOT / "tasks" / "_hf" / "trainer", trainer, dirs_exist_ok=True)
    config = tomllib.loads((ROOT / "tasks" / "repofix-smol" / "public" / "trainer"
                            / "config.toml").read_text())
    config.update({"steps": steps, "batch_size": 16, "lr": 3e-5, "schedule": "cosine",
                   "warmup_steps": 50, "completion_only_loss": True, "max_length": 2048})
    (trainer / "config.toml").write_text(tomli_w.dumps(config))
    subprocess.run([sys.executable, "trainer/train.py", "--base", str(base), "--data",
                    str(data), "--out", str(model), "--seed", "0"], cwd=out, check=True)
    return model


def pass_at_k(n: int, c: int, k: int) -> float:
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def attempt(item: dict, base_url: str, k: int) -> dict:
    """Sample edits for one instance and score each (the reference harness's prompt)."""
    import run as reference  # the reference harness's run.py
    import transcript
    from client import complete

    settings = tomllib.loads((REPOFIX / "reference_harness" / "harness.toml").read_text())
    settings["samples"] = k
    trees = builder()._module("trees")
    with tempfile.TemporaryDirectory() as scratch:
        folder = trees.harness_tree(item["label"], Path(scratch) / "tree")
        before = transcript.snapshot(folder)
        text, _ = reference.scripted(item["input"]["issue"], item["input"]["repository"],
                                     folder, settings)
        sampled = complete(base_url, text, settings["sampling"], stop=transcript.STOP, n=k)
        actions = [transcript.first_action(t) for t in sampled["texts"]]
        scored: dict[str, float] = {}
        for action in dict.fromkeys(actions):
            copy = Path(scratch) / f"try{len(scored)}"
            subprocess.run(["cp", "-r", str(folder), str(copy)], check=True)
            if action.startswith("edit "):
                transcript.edit(copy, action)
            scored[action] = trees.score_diff(item["label"], transcript.diff(before, copy))
    return {"id": item["label"]["key"], "scores": [scored[a] for a in actions]}


def val_items(out: Path, count: int) -> list[dict]:
    """``count`` instances of the val split, built once and kept in ``out/val-COUNT.json``."""
    kept = out / f"val-{count}.json"
    if not kept.is_file():
        items = builder().build_split(random.Random(0), count, set(), split="val")
        atomic_write(kept, json.dumps(items), mode=0o644)
    return json.loads(kept.read_text())


def evaluated(out: Path, name: str, model: Path, items: list[dict], k: int,
              device: str) -> dict:
    """pass@k of ``model``, kept in ``out/pass-NAME.json`` once scored: a stopped run
    scores only the models it had not."""
    kept = out / f"pass-{name}.json"
    if not kept.is_file():
        atomic_write(kept, json.dumps(evaluate(model, items, k, device), indent=1),
                     mode=0o644)
    found = json.loads(kept.read_text())
    print(json.dumps({name: {key: value for key, value in found.items() if key != "results"}}),
          flush=True)
    return found


def evaluate(model: Path, items: list[dict], k: int, device: str) -> dict:
    from vtbench.models.serving import serve_model

    with tempfile.TemporaryDirectory() as scratch, serve_model(
            model, Path(scratch) / "model.sock", port=0, device=device) as server, \
            ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda item: attempt(item, server.base_url, k), items))
    found = {f"pass@{j}": sum(pass_at_k(k, int(sum(r["scores"])), j) for r in results)
             / len(results) for j in (1, k)}
    return {**found, "instances": len(results), "results": results}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fetch", action="store_true",
                        help="download the pair libraries' sdists and stop")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--mutants", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--val", type=int, default=100)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes making pairs (default: one per core)")
    parser.add_argument("--flips", action="store_true",
                        help="pairs from the reversible modifiers' mutants too")
    stage = parser.add_mutually_exclusive_group()
    stage.add_argument("--pairs-only", action="store_true", help="make the pairs and stop")
    stage.add_argument("--pairs", type=Path, default=None,
                       help="a train.jsonl of pairs made by --pairs-only")
    args = parser.parse_args()
    if args.fetch:
        fetch_pair_libraries()
        return
    if args.out is None:
        parser.error("--out is required")
    from vtbench.models.smol import ensure_smol

    if args.pairs is None:
        data = make_pairs(args.out, args.mutants, args.flips, args.workers)
    else:
        data = args.out / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "train.jsonl").write_bytes(args.pairs.read_bytes())
    if args.pairs_only:
        return
    base = ensure_smol()
    tuned = train(args.out, data, base, args.steps)
    items = val_items(args.out, args.val)
    report = {name: evaluated(args.out, name, model, items, args.k, args.device)
              for name, model in (("base", base), ("tuned", tuned))}
    (args.out / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
