"""The tuner baseline: it changes the trainer's hyperparameters only (``lr``, ``steps`` and
``schedule`` in ``trainer/config.toml``), never its code, the data or the harness.

A small coordinate search from the shipped config (the one the initial model was trained
with), each candidate trained with the workspace's trainer and validated:

1. validate the initial model (the shipped config's result);
2. learning rate ×3 and ×0.3;
3. the other schedule (constant or cosine) at the best learning rate so far;
4. twice the steps at the best learning rate and schedule so far.

A candidate is trained only if its training, estimated from the seconds per step of the
last one, and a validation end before the deadline less a margin; otherwise, or when the
grader refuses a validation (its budget is spent), the search stops. Before submitting the
best, the config it was trained with is written back, so the submission's snapshot shows
the hyperparameters of the model submitted. Runs inside the research sandbox
(``python -m vtbench.agents.tuner_agent``).
"""

import argparse
import json
import re
import time
import tomllib
from pathlib import Path
from typing import Any

from vtbench.agents.scripted import (
    SUBMIT_MARGIN_S,
    WORKSPACE,
    BestSoFar,
    TrainingFailed,
    speaker,
    train,
)
from vtbench.client import GraderClient, seconds_left
from vtbench.errors import GraderError

say = speaker("tuner")
TUNED = ("lr", "steps", "schedule")
"""The only keys of ``trainer/config.toml`` the tuner writes."""
LR_FACTORS = (3.0, 0.3)
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
    settings = tomllib.loads(config.read_text())
    return {key: settings[key] for key in TUNED}


class Tuner:
    def __init__(self, client: GraderClient, seed: int, workspace: Path = WORKSPACE) -> None:
        self.seed, self.workspace = seed, workspace
        self.config = workspace / "trainer" / "config.toml"
        self.shipped = self.config.read_text()
        self.board = BestSoFar(client, say)
        self.tried: dict[str, dict[str, Any]] = {"models/initial": hyperparameters(self.config)}
        self.seconds_per_step: float | None = None
        self.validation_seconds = 0.0

    def incumbent(self) -> dict[str, Any]:
        return dict(self.tried[self.board.best()[1]])

    def candidates(self, stage: int) -> list[dict[str, Any]]:
        best = self.incumbent()
        if stage == 0:
            return [{**best, "lr": best["lr"] * factor} for factor in LR_FACTORS]
        if stage == 1:
            other = "cosine" if best["schedule"] == "constant" else "constant"
            return [{**best, "schedule": other}]
        return [{**best, "steps": best["steps"] * 2}]

    def affordable(self, settings: dict[str, Any]) -> bool:
        left = seconds_left()
        if left is None or self.seconds_per_step is None:
            return True
        needed = settings["steps"] * self.seconds_per_step + self.validation_seconds
        return needed + SUBMIT_MARGIN_S + SAFETY_S < left

    def try_settings(self, settings: dict[str, Any]) -> None:
        name = f"tune-{len(self.tried)}"
        set_hyperparameters(self.config, settings)
        say(f"{name}: {settings}")
        model = train(name, self.seed, say, self.workspace)
        log = json.loads((self.workspace / model / "train_log.json").read_text())
        self.seconds_per_step = log["seconds"] / max(1, settings["steps"])
        self.tried[model] = settings
        started = time.monotonic()
        self.board.validate(model)
        self.validation_seconds = max(self.validation_seconds, time.monotonic() - started)

    def search(self) -> None:
        for stage in range(3):
            for settings in self.candidates(stage):
                if not self.affordable(settings):
                    say(f"no time left to train {settings}; the search ends")
                    return
                self.try_settings(settings)

    def run(self) -> None:
        self.board.watch_the_clock()
        started = time.monotonic()
        self.board.validate("models/initial")
        self.validation_seconds = time.monotonic() - started
        try:
            self.search()
        except (TrainingFailed, GraderError) as err:
            say(f"the search ends: {err}")
        best = self.board.best()[1]
        if best == "models/initial":
            self.config.write_text(self.shipped)
        else:
            set_hyperparameters(self.config, self.tried[best])
        self.board.submit_best("done")


def main() -> None:
    parser = argparse.ArgumentParser(description="built-in tuner agent (hyperparameters only)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    Tuner(GraderClient.from_environment(), args.seed).run()


if __name__ == "__main__":
    main()
