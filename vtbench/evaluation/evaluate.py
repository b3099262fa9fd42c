"""The evaluation pipeline: serve the model, run the harness sandboxed, score.

Trusts: the model server code, the sandbox, the task's scorer and its pristine harness.
Does not trust: the model weights (safetensors only, loaded by the server), the candidate
harness (sandboxed, inputs only) and anything the harness writes (parsed defensively).
A fixed-harness task always runs the task's pristine harness with its fixed decoding,
whatever harness the caller passes; the result says which ran.

Given ``cores`` (an episode's reservation), every part runs on them: the model server (a
cpuset of its own, else its affinity), the harness sandbox (a cpuset) and the scoring (the
calling thread is pinned to them for the whole evaluation), so one episode's validation
never takes a core from another episode's training.
"""

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vtbench.evaluation.harness import Cores, finish_harness, start_harness
from vtbench.evaluation.result import EvaluationResult
from vtbench.evaluation.scoring import score_outputs
from vtbench.evaluation.standby import evaluation_folder, replenish
from vtbench.models.serving import serve_model
from vtbench.sandbox import get_sandbox, on_cores
from vtbench.tasks.materialize import materialize
from vtbench.tasks.registry import Task
from vtbench.tasks.store import load_split

SERVER_STARTUP_SECONDS = 180.0
"""How long the model server may take to load (the harness waits meanwhile)."""


def stage_harness(task: Task, harness_dir: Path | None, workdir: Path) -> tuple[Path, str]:
    """Copy the harness that will run into ``workdir/harness``; says ``pristine`` or
    ``candidate``."""
    if task.spec.harness_editable and harness_dir is not None:
        staged = workdir / "harness"
        shutil.copytree(harness_dir, staged, symlinks=False, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        return staged, "candidate"
    materialize(task, workdir, components=("harness",))
    return workdir / "harness", "pristine"


def evaluate(
    task: Task,
    model_dir: Path,
    split: str,
    harness_dir: Path | None = None,
    items: list[dict[str, Any]] | None = None,
    sandbox: str = "bwrap",
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float | None = None,
    standby: bool = True,
    cores: Cores = None,
) -> EvaluationResult:
    """Score (model, harness) on ``split``; ``harness_dir`` None means the task's initial one.

    ``timeout`` caps the harness's wall clock below the task's own limit. With ``standby``
    the harness runs in a sandbox started ahead (:mod:`vtbench.evaluation.standby`) when
    one is ready, and the next one starts while the model generates. ``cores``: where every
    part of it runs (see the module)."""
    with on_cores(cores):
        return _evaluate(task, model_dir, split, harness_dir, items, sandbox, on_progress,
                         timeout, standby, cores)


def _evaluate(task: Task, model_dir: Path, split: str, harness_dir: Path | None,
              items: list[dict[str, Any]] | None, sandbox: str,
              on_progress: Callable[[int, int], None] | None, timeout: float | None,
              standby: bool, cores: Cores) -> EvaluationResult:
    items = items if items is not None else load_split(task, split)
    started = time.monotonic()
    harness_spec = task.spec.components.harness
    decoding = None if harness_spec.editable else harness_spec.decoding.model_dump()  # type: ignore[union-attr]
    backend = get_sandbox(sandbox)
    with evaluation_folder(backend, standby, cores) as (workdir, waiting):
        harness, which = stage_harness(task, harness_dir, workdir)
        server_started = time.monotonic()
        limit = min(timeout or float("inf"), harness_spec.timeout_seconds)
        cpu_limit = harness_spec.cpu_limit_seconds(len(items))
        lay_out = getattr(task.builder, "instance_workspace", None)
        # The harness starts while the model loads: its relay binds the socket's folder,
        # which holds the socket only (the server's log lies beside it).
        with serve_model(model_dir, socket=workdir / "server" / "model.sock",
                         backend=task.serving_backend,
                         log_path=workdir / "model.log", ready=False,
                         startup_timeout=SERVER_STARTUP_SECONDS, cores=cores) as server:
            # Its clock starts when the server is ready: the model's load is not its time.
            if waiting is not None:
                launched = waiting.launch(harness_spec.entry, items, cpu_limit, decoding,
                                          lay_out)
            else:
                launched = start_harness(
                    backend, harness, harness_spec.entry, items, server.socket, workdir,
                    limit, decoding, lazy=True, grace=SERVER_STARTUP_SECONDS,
                    cpu_seconds=cpu_limit, cores=cores, lay_out=lay_out)
            try:
                server.wait_ready()
            except BaseException:
                launched.process.kill_tree(grace_seconds=0)
                raise
            ready = time.monotonic()
            if standby:  # the next validation's sandbox starts while this one generates
                replenish(backend, cores)
            run = finish_harness(
                launched, (lambda done: on_progress(done, len(items))) if on_progress else None,
                check=server.check_alive, deadline=ready + limit)
            harness_ended = time.monotonic()
            generation = server.stats()["generate_seconds"]  # a fresh server: all ours
    scoring_started = time.monotonic()
    instances = score_outputs(task, items, run.outputs)
    scoring = time.monotonic() - scoring_started
    score = sum(i.score for i in instances) / len(instances) if instances else 0.0
    return EvaluationResult(
        task=task.id, split=split, score=score, n=len(instances), harness=which,
        decoding=decoding, instances=instances, error=run.error,
        timings={"wall": time.monotonic() - started, "staging": server_started - started,
                 "server_start": ready - server_started, "harness": run.seconds,
                 "generation": generation, "finish": scoring_started - harness_ended,
                 "scoring": scoring})
