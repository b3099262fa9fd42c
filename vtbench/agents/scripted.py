"""What the built-in scripted agents (reference, filter, tuner) share: how they are
started, how they train a candidate with the workspace's trainer, and how they submit.

Each keeps a :class:`BestSoFar`: every validation it makes is recorded there, and it
submits exactly once, when its script ends or :data:`SUBMIT_MARGIN_S` before the
episode's deadline (the watchdog), whichever comes first: the best validated
(model, harness), or the initial model when nothing was validated. A slow machine so costs
an agent the steps it did not reach, never the whole episode. Runs inside the research
sandbox: it uses only the workspace, its trainer and the grader client.
"""

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vtbench.agents.base import AgentContext
from vtbench.client import GraderClient, seconds_left
from vtbench.gpus import ran_out_of_memory

WORKSPACE = Path("/workspace")
SUBMIT_MARGIN_S = 30.0
"""Time before the deadline at which the best result so far is submitted: enough for the
grader to copy and hash a smol-scale model."""

Say = Callable[[str], None]

SHIPPED = Path("models") / ".shipped"
"""Under the workspace: the components the lightweight agents change (``data/`` and
``trainer/config.toml``) as the episode gave them; under ``models/``, which snapshots leave
out, so that the submission's snapshot shows only the agent's change."""
SHIPPED_CONFIG = Path("trainer") / "config.toml"


def start_from_shipped(workspace: Path = WORKSPACE) -> None:
    """Begin the work on the components as the episode shipped them. They are kept under
    :data:`SHIPPED` at the agent's first start and put back at every later one: a resumed
    episode runs its agent again in the same workspace, where the interrupted run left its
    work half done (data already filtered, settings already changed), and filtering or
    tuning that again would find nothing to do or compound the change."""
    kept = workspace / SHIPPED
    if kept.exists():
        put_back_shipped(workspace)
        return
    partial = kept.with_name(f"{SHIPPED.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(workspace / "data", partial / "data")
    (partial / SHIPPED_CONFIG).parent.mkdir()
    shutil.copy2(workspace / SHIPPED_CONFIG, partial / SHIPPED_CONFIG)
    partial.rename(kept)


def put_back_shipped(workspace: Path = WORKSPACE) -> None:
    """Put ``data/`` and ``trainer/config.toml`` back as shipped (kept by
    :func:`start_from_shipped`): what an agent that submits the initial model does, so that
    the submission's snapshot is the initial system's."""
    kept = workspace / SHIPPED
    shutil.rmtree(workspace / "data")
    shutil.copytree(kept / "data", workspace / "data")
    shutil.copy2(kept / SHIPPED_CONFIG, workspace / SHIPPED_CONFIG)


@dataclass(frozen=True)
class ScriptedAgent:
    """A built-in scripted agent: ``python -m <module> --seed N`` in /workspace."""

    name: str
    module: str
    needs_gateway: bool = False
    needs_playbook: bool = False

    def command(self, context: AgentContext) -> list[str]:
        return [sys.executable, "-m", self.module, "--seed", str(context.seed)]

    def environment(self, context: AgentContext) -> dict[str, str]:
        return {}


class TrainingFailed(SystemExit):
    """The trainer exited with an error; uncaught, the agent exits with its message."""


class TrainingOutOfMemory(TrainingFailed):
    """The trainer ran out of GPU memory (another training may have held some of it)."""


def speaker(agent: str) -> Say:
    def say(message: str) -> None:
        print(f"[{agent} agent] {message}", flush=True)

    return say


def train(name: str, seed: int, say: Say, workspace: Path = WORKSPACE) -> str:
    """Train ``models/<name>`` with the workspace's trainer, data and config, one thread."""
    out = f"models/{name}"
    env = {**os.environ, "VTBENCH_THREADS": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "trainer/train.py", "--base", "models/base", "--out", out,
               "--seed", str(seed)]
    done = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        failure = TrainingOutOfMemory if ran_out_of_memory(done.stderr) else TrainingFailed
        raise failure(f"training {name} failed: {done.stdout[-300:]}{done.stderr[-300:]}")
    say(f"trained {out}")
    return out


def validated_before(client: GraderClient,
                     workspace: Path = WORKSPACE) -> dict[tuple[str, str | None], float]:
    """The episode's scored validations from before this start of the agent, by the (model,
    harness) folders they named, where those folders are still in ``workspace``: a resumed
    episode starts its agent again in the workspace the interrupted run left."""
    earlier: dict[tuple[str, str | None], float] = {}
    for validation in client.status().validations:
        harness = validation.harness_folder if validation.harness == "candidate" else None
        if validation.score is None or validation.model is None or (
                validation.harness == "candidate" and harness is None):
            continue
        folders = [validation.model] + ([harness] if harness else [])
        if all((workspace / folder).is_dir() for folder in folders):
            earlier[(validation.model, harness)] = validation.score
    return earlier


class BestSoFar:
    """The agent's validations, and its one submission of the best of them.

    An agent started again in a resumed episode takes up its earlier work as it walks its
    steps again: a (model, harness) validated before the restart is not validated again
    (its earlier score counts), and a model validated before is not trained again
    (:meth:`train`), so neither costs the episode's budget twice."""

    def __init__(self, client: GraderClient, say: Say, workspace: Path = WORKSPACE) -> None:
        self.client, self.say, self.workspace = client, say, workspace
        self.results: list[tuple[float, str, str | None]] = []
        self.lock = threading.Lock()
        self.submitted = False
        self.before = validated_before(client, workspace)
        if self.before:
            say(f"resumed: {len(self.before)} validation(s) from before the restart")

    def kept(self, model: str) -> bool:
        """Whether ``model`` was validated before the restart (and is still there)."""
        return any(validated == model for validated, _ in self.before)

    def train(self, name: str, seed: int) -> str:
        """Train ``models/<name>`` (:func:`train`), unless it was validated before the
        restart: then it is taken as it is."""
        model = f"models/{name}"
        if self.kept(model):
            self.say(f"kept {model}: trained and validated before the restart")
            return model
        return train(name, seed, self.say, self.workspace)

    def validate(self, model: str, harness: str | None = None) -> float:
        """The validation score (minus infinity when the validation failed)."""
        score = self.before.get((model, harness))
        if score is not None:
            self.say(f"validated {model} (harness {harness or 'initial'}) before the "
                     f"restart: {score}")
        else:
            score = self.client.validate(model, harness=harness).score
            self.say(f"validated {model} (harness {harness or 'initial'}): {score}")
        if score is not None:
            with self.lock:
                self.results.append((score, model, harness))
        return score if score is not None else float("-inf")

    def best(self) -> tuple[float | None, str, str | None]:
        """(score, model, harness) of the best validation; the initial model without one."""
        with self.lock:
            return self._best()

    def _best(self) -> tuple[float | None, str, str | None]:
        return max(self.results, key=lambda r: r[0], default=(None, "models/initial", None))

    def submit_best(self, why: str) -> None:
        """Submit the best validated (model, harness) once; later calls do nothing."""
        with self.lock:
            if self.submitted:
                return
            score, model, harness = self._best()
            # said first: the runner may end the agent as soon as the submission lands
            self.say(f"{why}: submitting {model} (harness {harness or 'initial'}) with "
                     f"validation score {score}")
            self.client.submit(model, harness=harness)
            self.submitted = True

    def watch_the_clock(self) -> None:
        """Submit the best so far :data:`SUBMIT_MARGIN_S` before the deadline."""
        left = seconds_left()
        if left is not None:
            timer = threading.Timer(max(0.0, left - SUBMIT_MARGIN_S), self.submit_best,
                                    args=("the deadline is near",))
            timer.daemon = True
            timer.start()
