"""Systems rebuilt from an episode's snapshots, outside the episode, each component taken
from the submission or from the initial workspace.

Trusted code that runs untrusted code: the submission's trainer is the agent's program,
so every training runs in a sandbox (the task's sandbox backend, one thread, no network)
that sees only the system's folder (``data/``, ``trainer/``, ``harness/`` taken out of the
snapshot history, symlinks leaving the folder refused) with the start model read-only
beside them; its output is served by the checked loader like any candidate. The task's
own initial system is the preparation's (trained by :func:`vtbench.prepare.systems.
train_system`, the trusted path) wherever a subset changes neither data nor trainer.

A rebuilt model is named by what made it (component trees, start model, command, seed),
so two subsets that make the same model train it once; models and scores are kept in
the episode's attribution store (:func:`vtbench.layout.attribution_store`), so a second
reproduction or attribution of the same episode trains and evaluates nothing.
"""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable
from pathlib import Path

from vtbench.episode.recipe import FIXED_STARTS, Retraining, RetrainStep, Snapshots
from vtbench.errors import VtbenchError
from vtbench.evaluation import evaluate
from vtbench.grader.merge import copy_tokenizer, mergekit_config, run_mergekit
from vtbench.models.base import resolve_base
from vtbench.prepare import PreparedTask
from vtbench.prepare.prepare import ScoreBook, system_folder
from vtbench.prepare.systems import train_system
from vtbench.sandbox import Limits, Mount, SandboxSpec, get_sandbox, prepare_writable
from vtbench.sandbox import python_runtime_mounts as runtime_mounts
from vtbench.tasks.store import atomic_write
from vtbench.workspace import read_only_copy

INSIDE = Path("/workspace")
INITIAL_KEY = "initial-seed"
RETRAINING_BUDGETS = 3
"""A retraining may run for this many times the episode's wall-clock budget: the episode
ran the same training within its budget, but a retraining may share a busier host (a
campaign's next episode beside it); the limit only stops a trainer that never ends."""
Say = Callable[[str], None]


class RebuildFailed(VtbenchError):
    """A system could not be rebuilt from the snapshots (the reason is in the message)."""


def key_of(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


class Rebuilder:
    """Rebuilds the submission of one episode with a chosen subset of its changes."""

    def __init__(self, recipe: Retraining, snapshots: Snapshots, prepared: PreparedTask,
                 store: Path, sandbox: str = "bwrap", say: Say = lambda line: None) -> None:
        self.recipe, self.snapshots, self.prepared = recipe, snapshots, prepared
        self.store, self.sandbox, self.say = store, sandbox, say
        self.initial = {c: snapshots.tree(recipe.initial_snapshot, c)
                        for c in ("data", "trainer", "harness")}
        self.submitted_harness = snapshots.tree(recipe.harness_snapshot, "harness")
        self.lock = threading.Lock()

    # --- which components a step changed ----------------------------------------------

    def changed(self) -> list[str]:
        """The components the submission changed: data or trainer where a training of its
        lineage used other trees than the initial ones (or, the trainer, started elsewhere
        than the base model, or merged: merging is a way of making the model), harness
        where the submitted one differs."""
        found: set[str] = set()
        for step in self.recipe.steps:
            if step.origin == "trained":
                if step.data_tree != self.initial["data"]:
                    found.add("data")
                if step.trainer_tree != self.initial["trainer"] or \
                        (step.start or "models/base") != "models/base":
                    found.add("trainer")
            elif step.origin == "merged":
                found.add("trainer")
        if self.prepared.task.spec.harness_editable and \
                self.submitted_harness != self.initial["harness"]:
            found.add("harness")
        return [c for c in ("data", "trainer", "harness") if c in found]

    # --- models ------------------------------------------------------------------------

    def model(self, subset: frozenset[str], offset: int) -> tuple[str, Path]:
        """(key, folder) of the submission's model with only ``subset`` of its changes, at
        seed offset ``offset``."""
        return self._step(len(self.recipe.steps) - 1, subset, offset)

    def initial_model(self, seed: int) -> tuple[str, Path]:
        """The initial system's model at ``seed``: the preparation's, trained by it (the
        task's own trainer, trusted) where that seed was not prepared."""
        task = self.prepared.task
        folder = system_folder(task, "initial")
        model = train_system(task, folder, resolve_base(task.spec.base_model), seed)
        return f"{INITIAL_KEY}{seed}", model

    def _step(self, index: int, subset: frozenset[str], offset: int) -> tuple[str, Path]:
        step = self.recipe.steps[index]
        if step.origin == "initial":
            return self.initial_model(offset)
        if step.origin == "reused":
            if not step.parents:
                raise RebuildFailed(f"{step.name} reuses a folder the lineage does not hold")
            return self._step(step.parents[0], subset, offset)
        if step.origin == "merged":
            return self._merged(step, subset, offset)
        return self._trained(step, subset, offset)

    def _trained(self, step: RetrainStep, subset: frozenset[str],
                 offset: int) -> tuple[str, Path]:
        data = step.data_tree if "data" in subset else self.initial["data"]
        trainer = step.trainer_tree if "trainer" in subset else self.initial["trainer"]
        start = step.start or "models/base"
        if "trainer" not in subset:
            start = "models/base"
        seed = step.seed if offset == 0 else (step.seed or 0) + offset
        if (data, trainer, start) == (self.initial["data"], self.initial["trainer"],
                                      "models/base"):
            return self.initial_model(seed or 0)  # the initial system at the same seed
        if step.snapshot is None or data is None or trainer is None:
            raise RebuildFailed(f"{step.name}: its snapshot does not hold data/ and trainer/")
        start_key, start_path = self._start(step, start, subset, offset)
        flags = set(step.options)
        key = key_of("trained", data, trainer, start_key, sorted(flags), seed)
        folder = self.store / "models" / key
        marker = folder / "complete"
        model = folder / "work" / "model"
        if not marker.exists():
            self.say(f"training {step.name} ({self._label(subset)}, seed offset {offset})")
            self._train(folder, {"data": data, "trainer": trainer}, start_path, seed, flags)
            marker.touch()
        return key, model

    def _start(self, step: RetrainStep, start: str, subset: frozenset[str],
               offset: int) -> tuple[str, Path]:
        if start == "models/base":
            return "base", resolve_base(self.prepared.task.spec.base_model)
        if start == "models/initial":
            return self.initial_model(0)
        if start in FIXED_STARTS or not step.parents:
            raise RebuildFailed(f"{step.name} started from {start}, which the lineage lacks")
        return self._step(step.parents[0], subset, offset)

    def _label(self, subset: frozenset[str]) -> str:
        return "+".join(c for c in ("data", "trainer", "harness") if c in subset) or "none"

    def _train(self, folder: Path, trees: dict[str, str], start: Path, seed: int | None,
               flags: set[str]) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        work = folder / "work"
        work.mkdir(parents=True)
        for name, tree in trees.items():
            self.extract(tree, work / name)
        # a copy readable by the sandbox uid, as a workspace's models/base is
        read_only_copy(start, work / "models" / "start")
        prepare_writable(work)
        argv = self._command(seed, flags)
        spec = SandboxSpec(
            mounts=[*runtime_mounts(), Mount(source=work, target=INSIDE, writable=True),
                    Mount(source=work / "models" / "start", target=INSIDE / "models" / "start")],
            env={"PATH": f"{sys.prefix}/bin:/usr/bin:/bin", "HOME": "/tmp/home",
                 "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1",
                 "TRANSFORMERS_OFFLINE": "1", "VTBENCH_THREADS": "1", "OMP_NUM_THREADS": "1",
                 "TOKENIZERS_PARALLELISM": "false"},
            cwd=INSIDE, limits=self._limits())
        done = get_sandbox(self.sandbox).run(argv, spec)
        if done.returncode != 0 or not (work / "model").is_dir():
            tail = (done.stdout + done.stderr).decode(errors="replace").strip()[-300:]
            limit = done.killed_by_limit or ("wall_seconds" if done.timed_out else None)
            stopped = f" (stopped by its {limit} limit)" if limit else ""
            raise RebuildFailed(f"retraining from the snapshot failed{stopped}: {tail}")

    def _command(self, seed: int | None, flags: set[str]) -> list[str]:
        """The trainer entry for this rebuild: the options the agent's command gave
        (all of them where no command was seen), ``--seed`` wherever a seed is set."""
        entry = self.recipe.trainer_entry
        values = {"{base}": "models/start", "{out}": "model",
                  "{seed}": str(seed) if seed is not None else None}
        argv, index = [], 0
        while index < len(entry):
            part = entry[index]
            following = entry[index + 1] if index + 1 < len(entry) else None
            if part.startswith("-") and following is not None and not following.startswith("-"):
                value = values.get(following, following)
                if value is not None and (not flags or part in flags or following in
                                          ("{out}", "{base}") or
                                          (following == "{seed}" and seed is not None)):
                    argv += [part, value]
                index += 2
                continue
            if index == 0 and part == "python":
                argv.append(sys.executable)
            elif part in values:  # a positional placeholder
                argv += [values[part] or "0"]
            else:
                argv.append(part)
            index += 1
        return argv

    def _limits(self) -> Limits:
        resources = self.prepared.task.spec.resources
        budget = self.prepared.task.spec.budgets.wall_clock_minutes * 60
        return Limits(wall_seconds=RETRAINING_BUDGETS * budget,
                      memory_mb=int(max(resources.memory_gb, 8) * 4096), pids=512,
                      file_size_mb=max(1, int(resources.max_file_gb * 1024)),
                      open_files=4096, tmp_mb=1024)

    def _merged(self, step: RetrainStep, subset: frozenset[str],
                offset: int) -> tuple[str, Path]:
        """The merge of the parents rebuilt with ``subset``; without the trainer's change
        (merging is one) its first model rebuilt with ``subset`` stands in for it."""
        from vtbench.grader.api import MergeRequest

        if not step.parents:
            raise RebuildFailed(f"{step.name} merges folders the lineage does not hold")
        if "trainer" not in subset:
            return self._step(step.parents[0], subset, offset)
        parts = (step.method or "").split()
        options = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        built = [self._step(p, subset, offset) for p in step.parents]
        names = [self.recipe.steps[p].name for p in step.parents]
        models = names[:len(step.weights)]
        request = MergeRequest(
            method=parts[0], models=models, weights=step.weights, out="models/merged",  # type: ignore[arg-type]
            base=names[len(models)] if len(names) > len(models) else None,
            density=float(options["density"]) if "density" in options else None,
            t=float(options["t"]) if "t" in options else None)
        paths = {name: path for name, (_, path) in zip(names, built, strict=True)}
        if request.base_model and request.base_model not in paths:
            paths[request.base_model] = resolve_base(self.prepared.task.spec.base_model)
        key = key_of("merged", step.method, step.weights, [k for k, _ in built])
        folder = self.store / "models" / key
        if not (folder / "complete").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            with self.lock:
                run_mergekit(mergekit_config(request, paths), folder / "model")
            copy_tokenizer(paths[models[0]], folder / "model")
            (folder / "complete").touch()
        return key, folder / "model"

    # --- harnesses and scores --------------------------------------------------------

    def harness(self, subset: frozenset[str]) -> tuple[str, Path | None]:
        """(key, folder) of the harness: the submitted one with ``harness`` in ``subset``."""
        tree = self.submitted_harness if "harness" in subset else self.initial["harness"]
        if tree is None or not self.prepared.task.spec.harness_editable:
            return "pristine", None
        folder = self.store / "harness" / tree
        if not (folder / "complete").exists():
            shutil.rmtree(folder, ignore_errors=True)
            self.extract(tree, folder / "harness")
            (folder / "complete").touch()
        return tree, folder / "harness"

    def score(self, subset: frozenset[str], offset: int, split: str) -> float:
        """The val or test score of the submission with only ``subset`` of its changes."""
        model_key, model = self.model(subset, offset)
        harness_key, harness = self.harness(subset)
        if model_key.startswith(INITIAL_KEY) and "harness" not in subset:
            seed = int(model_key.removeprefix(INITIAL_KEY))
            prepared = ScoreBook(self.prepared.task).get("initial", split, seed)
            if prepared is not None:  # the initial system, as the preparation scored it
                return prepared
        scores = self.store / "scores.json"
        key = f"{model_key}|{harness_key}|{split}"
        with self.lock:
            known = json.loads(scores.read_text()) if scores.exists() else {}
        if key in known:
            return float(known[key])
        self.say(f"evaluating {self._label(subset)} (seed offset {offset}) on {split}")
        result = evaluate(self.prepared.task, model, split, harness_dir=harness,
                          sandbox=self.sandbox)
        if result.error:
            raise RebuildFailed(f"evaluating the rebuilt system on {split} failed: "
                                f"{result.error}")
        with self.lock:
            known = json.loads(scores.read_text()) if scores.exists() else {}
            known[key] = round(result.score, 6)
            atomic_write(scores, json.dumps(known, indent=2, sort_keys=True))
        return float(known[key])

    def extract(self, tree: str, into: Path) -> None:
        """The files of snapshot tree ``tree`` into ``into``; links leaving it refused."""
        archive = git_bytes(self.snapshots, "archive", "--format=tar", tree)
        into.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(into, filter="data")



def git_bytes(snapshots: Snapshots, *args: str) -> bytes:
    """The output of a git command on the snapshot history, as bytes (an archive)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1",
           "HOME": str(snapshots.git_dir), "GIT_DIR": str(snapshots.git_dir)}
    try:
        return subprocess.run(["git", *args], env=env, capture_output=True,
                              check=True).stdout
    except subprocess.CalledProcessError as error:
        raise RebuildFailed(f"the snapshot history lacks {args[-1]}: "
                            f"{error.stderr.decode(errors='replace').strip()[-200:]}") from None
