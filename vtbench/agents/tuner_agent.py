"""The tuner baseline: it changes the trainer's settings only (``lr``, ``steps``,
``schedule`` and ``warmup_steps`` in ``trainer/config.toml``), never its code, the data or
the harness.

A small search from the shipped config (the one the initial model was trained with, put
back first when an interrupted episode runs the agent again: :func:`start_from_shipped`),
each candidate trained with the workspace's trainer and validated:

1. validate the initial model (the shipped config's result);
2. the usual recipe: twice the steps, cosine decay, a warm-up of 5 % of the steps;
3. the best so far with the learning rate ×2 and ×0.5;
4. the best so far with half as many steps again.

A candidate already tried is not tried again. Before each one the tuner reads what the
episode has left (the grader's status, as ``vtbench status --json`` shows it, and the
deadline): it is trained only if a validation is left, the grader's compute seconds cover
one more validation, and its training (estimated from the seconds per step of the last
one, at first the initial model's ``train_log.json``) and a validation end before the
deadline less a margin; otherwise it is skipped. A training that fails (a learning rate
that diverges) costs only that candidate; a grader that refuses a validation ends the
search. The best validated candidate is submitted with the config it was trained with
written back, so the submission's snapshot shows the settings of the model submitted;
when nothing beat the initial model on validation, the initial model is submitted and the
config is the shipped one. Runs inside the research sandbox
(``python -m vtbench.agents.tuner_agent``).
"""

import argparse
import json
import re
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vtbench.agents.scripted import (
    SUBMIT_MARGIN_S,
    WORKSPACE,
    BestSoFar,
    Say,
    TrainingFailed,
    put_back_shipped,
    speaker,
    start_from_shipped,
)
from vtbench.client import GraderClient, seconds_left
from vtbench.errors import GraderError

TUNED = ("lr", "steps", "schedule", "warmup_steps")
"""The only keys of ``trainer/config.toml`` the tuner writes."""
WARMUP_SHARE = 0.05
LR_FACTORS = (2.0, 0.5)
SAFETY_S = 30.0
"""Slack on top of the estimate (and of the watchdog's margin) before starting a training."""


def toml_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def set_hyperparameters(config: Path, values: dict[str, Any]) -> None:
    """Rewrite only the lines of ``values``' keys (comments after a value are kept); a key
    the file lacks is appended."""
    unknown = set(values) - set(TUNED)
    if unknown:
        raise ValueError(f"the tuner does not change {sorted(unknown)}")
    text = config.read_text()
    for key, value in values.items():
        text = with_value(text, key, toml_value(value))
    tomllib.loads(text)  # never leave the trainer a config it cannot read
    config.write_text(text)


def with_value(text: str, key: str, written: str) -> str:
    pattern = re.compile(rf"^(\s*{key}\s*=\s*)([^#\n]*?)(\s*(#.*)?)$", re.M)
    text, found = pattern.subn(lambda m: f"{m[1]}{written}{m[3]}", text)
    if found:
        return text
    return text + ("" if text.endswith("\n") else "\n") + f"{key} = {written}\n"


def hyperparameters(config: Path) -> dict[str, Any]:
    """The tuned keys of a config (a missing warm-up is none, as the trainer reads it)."""
    settings = tomllib.loads(config.read_text())
    return {"warmup_steps": 0} | {key: settings[key] for key in TUNED if key in settings}


def with_steps(settings: dict[str, Any], steps: int) -> dict[str, Any]:
    """``settings`` for ``steps`` steps, the warm-up keeping its share."""
    warmup = round(settings["warmup_steps"] * steps / max(1, settings["steps"]))
    return {**settings, "steps": steps, "warmup_steps": warmup}


def recipe(settings: dict[str, Any]) -> dict[str, Any]:
    """Twice the steps, cosine decay and a warm-up of :data:`WARMUP_SHARE` of the steps."""
    steps = 2 * settings["steps"]
    return {**settings, "steps": steps, "schedule": "cosine",
            "warmup_steps": max(1, round(WARMUP_SHARE * steps))}


def seconds_per_step(model: Path) -> float | None:
    """How long a step took when ``model`` was trained, from its ``train_log.json``."""
    try:
        log = json.loads((model / "train_log.json").read_text())
        return float(log["seconds"]) / max(1, int(log["config"]["steps"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Tuner:
    def __init__(self, client: GraderClient, seed: int, workspace: Path = WORKSPACE,
                 say: Say | None = None) -> None:
        self.client, self.seed, self.workspace = client, seed, workspace
        self.say = say or speaker("tuner")
        start_from_shipped(workspace)
        self.config = workspace / "trainer" / "config.toml"
        self.board = BestSoFar(client, self.say, workspace)
        self.tried: dict[str, dict[str, Any]] = {"models/initial": hyperparameters(self.config)}
        self.seconds_per_step = seconds_per_step(workspace / "models" / "initial")
        self.validation_seconds = 0.0
        self.validation_compute = 0.0

    def incumbent(self) -> dict[str, Any]:
        return dict(self.tried[self.board.best()[1]])

    def candidates(self) -> Iterator[dict[str, Any]]:
        """The search's candidates, each made from the best so far when it is reached."""
        yield recipe(self.tried["models/initial"])
        best = self.incumbent()
        for factor in LR_FACTORS:
            yield {**best, "lr": best["lr"] * factor}
        best = self.incumbent()
        yield with_steps(best, best["steps"] + best["steps"] // 2)

    def next_name(self) -> str:
        return f"tune-{len(self.tried)}"

    def unaffordable(self, settings: dict[str, Any]) -> str | None:
        """Why the episode's budget cannot take this candidate, or None when it can (always
        when it was trained and validated before a restart: it costs nothing again)."""
        if self.board.kept(f"models/{self.next_name()}"):
            return None
        status = self.client.status()
        if status.validations_left < 1:
            return "no validation left"
        if status.compute_seconds_left < self.validation_compute:
            return "the grader's compute seconds would not cover its validation"
        left = seconds_left()
        if left is None or self.seconds_per_step is None:
            return None
        needed = settings["steps"] * self.seconds_per_step + self.validation_seconds
        if needed + SUBMIT_MARGIN_S + SAFETY_S >= left:
            return f"its training and validation (about {needed:.0f} s) would not end in time"
        return None

    def validate(self, model: str) -> None:
        """Validate ``model``, measuring its wall and grader-compute seconds."""
        compute_before, started = self.client.status().compute_seconds_left, time.monotonic()
        self.board.validate(model)
        self.validation_seconds = max(self.validation_seconds, time.monotonic() - started)
        spent = compute_before - self.client.status().compute_seconds_left
        self.validation_compute = max(self.validation_compute, spent)

    def try_settings(self, settings: dict[str, Any]) -> None:
        name = self.next_name()
        set_hyperparameters(self.config, settings)
        self.say(f"{name}: {settings}")
        self.tried[f"models/{name}"] = settings
        started = time.monotonic()
        try:
            model = self.board.train(name, self.seed)
        except TrainingFailed as err:
            self.say(str(err))
            return
        if not self.board.kept(model):
            self.seconds_per_step = (time.monotonic() - started) / max(1, settings["steps"])
        self.validate(model)

    def search(self) -> None:
        try:
            for settings in self.candidates():
                if settings in self.tried.values():
                    continue
                why_not = self.unaffordable(settings)
                if why_not:
                    self.say(f"skipping {settings}: {why_not}")
                    continue
                self.try_settings(settings)
        except GraderError as err:
            self.say(f"the search ends: {err}")

    def start(self) -> None:
        """Start the watchdog and validate the initial model."""
        self.board.watch_the_clock()
        self.validate("models/initial")

    def finish(self) -> None:
        """Write back the best candidate's settings (or put everything back), submit it."""
        best = self.board.best()[1]
        if best == "models/initial":
            put_back_shipped(self.workspace)
        else:
            set_hyperparameters(self.config, self.tried[best])
        self.board.submit_best("done")

    def run(self) -> None:
        self.start()
        self.search()
        self.finish()


def main() -> None:
    parser = argparse.ArgumentParser(description="built-in tuner agent (hyperparameters only)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    Tuner(GraderClient.from_environment(), args.seed).run()


if __name__ == "__main__":
    main()
