"""``vtbench prepare``: splits, systems, trainings and scores of tasks, resumable.

Trainings of independent systems, of every task asked for at once, run in parallel
processes of one thread each (:mod:`vtbench.prepare.jobs` schedules them); on a GPU host
they and the evaluations share the GPU side by side, each within an even share of its
memory (:func:`vtbench.gpus.side_by_side`). Every
result lands in ``scores.json`` as soon as it exists, so a crash loses at most the
evaluation in flight, and a second run with everything cached does no work.
"""

import json
import statistics
import threading
from collections.abc import Callable, Collection
from functools import partial
from pathlib import Path
from typing import Any

from vtbench import layout
from vtbench.errors import VtbenchError
from vtbench.evaluation import evaluate
from vtbench.gpus import memory_share, side_by_side
from vtbench.intervals import mean_ci
from vtbench.models.base import resolve_base
from vtbench.prepare.digest import forget_stale, is_current
from vtbench.prepare.jobs import Job, RunAlone, run_jobs
from vtbench.prepare.systems import (
    CALIBRATION_SYSTEMS,
    SystemPlan,
    TrainingOutOfMemory,
    build_components,
    estimated_cost,
    is_complete,
    model_dir,
    plans_for,
    train_system,
)
from vtbench.tasks.registry import Task
from vtbench.tasks.store import atomic_write, ensure_splits

Reporter = Callable[[str, str], None]


class PrepareFailed(VtbenchError):
    """An evaluation of a task's own system failed: its score would be meaningless."""
"""Called with (job name, progress line)."""


def scores_path(task: Task) -> Path:
    return layout.task_store(task.id) / "scores.json"


def system_folder(task: Task, name: str) -> Path:
    return layout.task_store(task.id) / "systems" / name


def load_scores(task: Task) -> dict[str, Any]:
    path = scores_path(task)
    return json.loads(path.read_text()) if path.exists() else {}


class ScoreBook:
    """scores.json as {system: {split: {seed: score}}}, saved after every change."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.scores = load_scores(task)
        self.lock = threading.Lock()

    def get(self, system: str, split: str, seed: int) -> float | None:
        return self.scores.get(system, {}).get(split, {}).get(str(seed))

    def put(self, system: str, split: str, seed: int, score: float) -> None:
        with self.lock:
            self.scores.setdefault(system, {}).setdefault(split, {})[str(seed)] = score
            self._save()

    def forget(self, system: str) -> bool:
        """Drop every score of ``system``; whether it had any."""
        with self.lock:
            had = self.scores.pop(system, None) is not None
            if had:
                self._save()
            return had

    def _save(self) -> None:
        atomic_write(scores_path(self.task), json.dumps(self.scores, indent=2, sort_keys=True))


MARGIN_SYSTEMS = ("initial", "light", "reference")
"""The systems scored on test at every seed of a calibration: the co-design margin compares
the light system's test gain with the reference's, seed by seed."""


def splits_for(plan: SystemPlan, seed: int, calibrate: bool = False) -> tuple[str, ...]:
    """Val always; test for the episode's systems at seed 0 (the gain's zero and the
    normaliser), and with ``calibrate`` for the margin's systems at every seed."""
    if plan.name in ("initial", "reference") and seed == 0:
        return ("val", "test")
    return ("val", "test") if calibrate and plan.name in MARGIN_SYSTEMS else ("val",)


def run_system(task: Task, plan: SystemPlan, seed: int, book: ScoreBook, report: Reporter,
               sandbox: str = "bwrap", calibrate: bool = False,
               whole_gpu: bool = False) -> None:
    job = f"{task.id}/{plan.name}/seed{seed}"
    folder = system_folder(task, plan.name)
    model_owner = system_folder(task, plan.model_system)
    missing = [s for s in splits_for(plan, seed, calibrate)
               if book.get(plan.name, s, seed) is None]
    if not missing and is_complete(model_dir(model_owner, seed)):
        return
    try:
        model = train_system(task, model_owner, resolve_base(task.spec.base_model), seed,
                             on_line=lambda line: report(job, line.strip()),
                             whole_gpu=whole_gpu)
    except TrainingOutOfMemory as error:
        if whole_gpu or memory_share() is None:
            raise
        report(job, "out of its share of the GPU's memory: it trains again alone, "
                    "with the whole GPU, once the jobs beside it have ended")
        raise RunAlone(str(error)) from error
    for split in missing:
        report(job, f"evaluating on {split}")
        def progress(done: int, total: int, split: str = split) -> None:
            report(job, f"{split}: {done} of {total} instances run")

        result = evaluate(task, model, split, harness_dir=folder / "harness",
                          sandbox=sandbox, on_progress=progress)
        if result.error:
            raise PrepareFailed(f"{job}: evaluation on {split} failed: {result.error}")
        book.put(plan.name, split, seed, round(result.score, 4))
        report(job, f"{split} score {result.score:.3f} ({result.n} instances)")
    report(job, "done")


def prepare_task(task: Task, seeds: tuple[int, ...] = (0,), workers: int = 2,
                 report: Reporter = lambda job, line: None,
                 sandbox: str = "bwrap", calibrate: bool = False,
                 only: Collection[str] = CALIBRATION_SYSTEMS) -> dict[str, Any]:
    return prepare_tasks([task], seeds, workers, report, sandbox, calibrate, only)[0]


def prepare_tasks(tasks: list[Task], seeds: tuple[int, ...] = (0,), workers: int = 2,
                  report: Reporter = lambda job, line: None,
                  sandbox: str = "bwrap", calibrate: bool = False,
                  only: Collection[str] = CALIBRATION_SYSTEMS) -> list[dict[str, Any]]:
    """Prepare several tasks on one set of workers: the trainings of every task, longest
    first, so that no worker idles at the end of one task while another still trains;
    each system that reuses a model as soon as that model exists. Without ``calibrate``
    only the systems an episode needs (initial, reference); with it also the ablations
    the calibration table shows (those named in ``only``)."""
    training: list[tuple[float, Job]] = []
    reusing: list[Job] = []
    for task in tasks:
        ensure_splits(task)
        if forget_stale(task):
            report(task.id, "the task or its base model changed since it was prepared: "
                            "preparing it again")
        book = ScoreBook(task)
        for plan in plans_for(task, calibrate, only):
            folder = system_folder(task, plan.name)
            if build_components(task, plan, folder) and plan.lightweight \
                    and book.forget(plan.name):
                report(task.id, f"the {plan.name} agent's work changed since it was "
                                "prepared: its system is trained and scored again")
            cost = estimated_cost(folder) if plan.trains else 0.0
            for seed in seeds:
                name = f"{task.id}/{plan.name}/seed{seed}"
                run = partial(run_system, task, plan, seed, book, report, sandbox,
                              calibrate)
                if plan.trains:
                    training.append((cost, Job(name, run,
                                               run_alone=partial(run, whole_gpu=True))))
                else:
                    model = model_dir(system_folder(task, plan.model_system), seed)
                    reusing.append(Job(name, run, ready=partial(is_complete, model)))
    training.sort(key=lambda costed: -costed[0])
    jobs = [job for _, job in training] + reusing
    with side_by_side(min(workers, len(jobs))) as share:
        if share is not None:
            report("prepare", f"{min(workers, len(jobs))} jobs side by side on the GPU, "
                              f"each within {share:.0%} of its memory")
        run_jobs(jobs, workers)
    return [task_scores(task) for task in tasks]


def _mean(values: dict[str, float] | None) -> float | None:
    return round(statistics.fmean(values.values()), 4) if values else None


def _spread(values: dict[str, float] | None) -> float | None:
    return round(statistics.stdev(values.values()), 4) if values and len(values) > 1 else None


def gains(scores: dict[str, Any], system: str) -> list[float]:
    """``system``'s test gain over the initial system at every seed that scored both."""
    initial, own = scores.get("initial", {}).get("test", {}), scores.get(system, {}).get("test", {})
    return [own[seed] - initial[seed] for seed in sorted(own) if seed in initial]


def co_design_margin(scores: dict[str, Any]) -> dict[str, Any]:
    """The light and reference systems' test gains (means over seeds with 95 % Student t
    intervals) and the margin: the share of the reference's mean gain the light system's
    does not reach (None while either is missing or the reference gains nothing)."""
    light, reference = gains(scores, "light"), gains(scores, "reference")
    (light_mean, light_ci), (reference_mean, reference_ci) = mean_ci(light), mean_ci(reference)
    margin = (None if light_mean is None or not reference_mean or reference_mean <= 0
              else round(1 - light_mean / reference_mean, 4))
    return {"light": _rounded(light_mean, light_ci), "reference": _rounded(reference_mean,
                                                                           reference_ci),
            "margin": margin, "seeds": min(len(light), len(reference))}


def _rounded(mean: float | None, interval: list[float] | None) -> dict[str, Any]:
    return {"gain": None if mean is None else round(mean, 4),
            "interval": None if interval is None else [round(v, 4) for v in interval]}


def leave_one_out(task: Task, val: Callable[[str, str], float | None]) -> dict[str, Any]:
    """Val of the reference with one component's change reverted; with a fixed harness
    that is the other component's change alone."""
    if task.spec.harness_editable:
        return {name: val(f"without-{name}", "val") for name in ("data", "trainer", "harness")}
    return {"data": val("trainer", "val"), "trainer": val("data", "val"), "harness": None}


def task_scores(task: Task) -> dict[str, Any]:
    """The ``tasks scores`` object: :func:`score_summary` and whether the task was prepared
    from the task as it is now (``current``: hashes the pack and its base model)."""
    return {**score_summary(task), "current": is_current(task)}


def score_summary(task: Task) -> dict[str, Any]:
    """Initial/reference/light val means and test of seed 0 (the model every episode starts
    from, and the normaliser), the co-design margin over seeds, ablations (one component's
    change alone), leave-one-out (one reverted) and seed spreads, read from ``scores.json``
    alone."""
    scores = load_scores(task)

    def split_mean(system: str, split: str) -> float | None:
        return _mean(scores.get(system, {}).get(split))

    def test_seed0(system: str) -> float | None:
        score: float | None = scores.get(system, {}).get("test", {}).get("0")
        return score

    return {
        "task": task.id,
        "initial": {"val": split_mean("initial", "val"), "test": test_seed0("initial")},
        "reference": {"val": split_mean("reference", "val"), "test": test_seed0("reference")},
        "light": {"val": split_mean("light", "val"), "test": test_seed0("light")},
        "margin": co_design_margin(scores),
        "ablations": {name: split_mean(name, "val") if name != "harness"
                      or task.spec.harness_editable else None
                      for name in ("data", "trainer", "harness")},
        "leave_one_out": leave_one_out(task, split_mean),
        "seed_sd": {name: _spread(values.get("val")) for name, values in scores.items()},
        "seeds": max((len(v.get("val", {})) for v in scores.values()), default=0),
    }
